package allocator

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Marks of ended calls moved from hourly hashes (Keys.EndedCalls, one HGET
// per hour of allocator.ended_ttl to find one) to sorted sets by call id
// (Keys.EndedMarks, one ZSCORE). An older edge still running during a
// rolling upgrade, or before it, wrote hashes that must keep refusing
// replays until they expire: allocate.lua reads them too while
// Keys.EndedLegacy exists. Each replica looks for them once a minute and
// keeps EndedLegacy alive until the newest one it found expires; until
// its first look succeeds (Heartbeat looks; a replica that never beats
// never does), its allocations read them whatever EndedLegacy says. A mark
// an older replica writes between two looks is covered by the call's
// tombstone (the call info TTL, an hour by default), which allocate reads
// first.

// endedLayoutEvery is how often a replica looks for marks of the layout
// before: well inside the call info TTL.
const endedLayoutEvery = time.Minute

// endedLayout is this replica's last look for marks of the layout before.
type endedLayout struct {
	mu     sync.Mutex   // held by the one look in progress
	looked atomic.Int64 // unix ms of the last look that succeeded; 0: none
}

// legacyMarksArg is allocate.lua's argument that says whether this
// replica must read marks of the layout before whatever EndedLegacy says:
// "1" until its first look succeeded.
func (a *Allocator) legacyMarksArg() string {
	if a.endedLayout.looked.Load() == 0 {
		return "1"
	}
	return "0"
}

// lookWhenDue looks for marks of the layout before when the last look is
// endedLayoutEvery old (Heartbeat, on every replica). A failed look is
// tried again at the next beat; until one succeeds, allocations read the
// marks of the layout before anyway.
func (a *Allocator) lookWhenDue(ctx context.Context, horizon time.Duration) {
	l := &a.endedLayout
	if last := l.looked.Load(); last != 0 && time.Since(time.UnixMilli(last)) < endedLayoutEvery {
		return
	}
	if !l.mu.TryLock() {
		return
	}
	defer l.mu.Unlock()
	if a.lookForLegacyMarks(ctx, horizon) == nil {
		l.looked.Store(time.Now().UnixMilli())
	}
}

// lookForLegacyMarks finds the newest EndedCalls hash of the last horizon
// (one EXISTS per hour, naming its 1,024 shards) and, when there is one,
// makes EndedLegacy last until that hash expires.
func (a *Allocator) lookForLegacyMarks(ctx context.Context, horizon time.Duration) error {
	if horizon <= 0 {
		return nil
	}
	bucket := EndedBucket.Milliseconds()
	now := time.Now().UnixMilli()
	// One bucket more at each end for the clocks of Redis and this host.
	newest, oldest := now/bucket+1, (now-horizon.Milliseconds())/bucket-1
	pipe := a.rdb.Pipeline()
	counts := make(map[int64]*redis.IntCmd, newest-oldest+1)
	for b := newest; b >= oldest; b-- {
		keys := make([]string, EndedShards)
		for shard := range EndedShards {
			keys[shard] = a.keys.EndedCalls(strconv.FormatInt(b, 10) + ":" + strconv.Itoa(shard))
		}
		counts[b] = pipe.Exists(ctx, keys...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable(err)
	}
	for b := newest; b >= oldest; b-- {
		if counts[b].Val() == 0 {
			continue
		}
		// When the hashes of bucket b expire (lib.lua's layout before:
		// the end of the hour plus the ended TTL), and a minute for the
		// clocks.
		until := (b+1)*bucket + horizon.Milliseconds() + time.Minute.Milliseconds()
		key := a.keys.EndedLegacy()
		had, err := a.rdb.Get(ctx, key).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return unavailable(err)
		}
		if had >= until {
			return nil
		}
		_, err = a.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, until, 0)
			p.PExpireAt(ctx, key, time.UnixMilli(until))
			return nil
		})
		return unavailable(err)
	}
	return nil
}
