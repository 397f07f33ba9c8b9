package allocator

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// PredecessorCalls counts live calls the predecessor allocated (call info
// without edge's pool_type field) among the first limit call keys a SCAN
// returns: a sign that it still shares this Redis, or did until lately.
// Its calls have no renewing media socket through edge, so a short edge
// lease would end them: the caller warns when it finds any
// while allocator.migration is off.
func (a *Allocator) PredecessorCalls(ctx context.Context, limit int) (int, error) {
	// One round trip per SCAN page (its HMGETs pipelined), not one per
	// call: this runs at every replica's start.
	count := func(ctx context.Context, c redis.UniversalClient) (int, error) {
		n, seen := 0, 0
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, a.keys.Call("*"), 256).Result()
			if err != nil {
				return n, err
			}
			keys = keys[:min(len(keys), limit-seen)]
			seen += len(keys)
			if len(keys) > 0 {
				pipe := c.Pipeline()
				fields := make([]*redis.SliceCmd, len(keys))
				for i, k := range keys {
					fields[i] = pipe.HMGet(ctx, k, "pod_name", "pool_type")
				}
				if _, err := pipe.Exec(ctx); err != nil {
					return n, err
				}
				for _, f := range fields {
					if v := f.Val(); len(v) == 2 && v[0] != nil && v[1] == nil {
						n++
					}
				}
			}
			cursor = next
			if cursor == 0 || seen >= limit {
				return n, nil
			}
		}
	}
	var (
		n   int
		err error
	)
	if cc, ok := a.rdb.(*redis.ClusterClient); ok {
		var total atomic.Int64 // masters are scanned concurrently
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			k, err := count(ctx, m)
			total.Add(int64(k))
			return err
		})
		n = int(total.Load())
	} else {
		n, err = count(ctx, a.rdb)
	}
	if err != nil {
		return n, fmt.Errorf("look for the predecessor's calls: %w", err)
	}
	return n, nil
}
