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
// lease would end them (issue 9): the caller warns when it finds any
// while allocator.migration is off.
func (a *Allocator) PredecessorCalls(ctx context.Context, limit int) (int, error) {
	count := func(ctx context.Context, c redis.UniversalClient) (int, error) {
		n, seen := 0, 0
		iter := c.Scan(ctx, 0, a.keys.Call("*"), 256).Iterator()
		for iter.Next(ctx) && seen < limit {
			seen++
			f, err := c.HMGet(ctx, iter.Val(), "pod_name", "pool_type").Result()
			if err != nil {
				return n, err
			}
			if f[0] != nil && f[1] == nil {
				n++
			}
		}
		return n, iter.Err()
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
