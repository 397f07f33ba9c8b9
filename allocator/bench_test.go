package allocator_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// measure runs fn b.N times (in parallel when parallel) and reports Redis
// CPU and client round trips per op next to ns/op.
func measure(b *testing.B, srv *testredis.Server, rdb *redis.Client, trips *testredis.RoundTrips, parallel bool, fn func(i int64)) {
	ctx := context.Background()
	cmdsBefore := srv.CommandStats(ctx, rdb)
	cpuBefore := srv.CPU(ctx, rdb)
	tripsBefore := trips.Load()
	var n atomic.Int64
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				fn(n.Add(1))
			}
		})
	} else {
		for b.Loop() {
			fn(n.Add(1))
		}
	}
	b.StopTimer()
	ops := float64(n.Load())
	cmdsAfter := srv.CommandStats(ctx, rdb)
	b.ReportMetric(float64((srv.CPU(ctx, rdb)-cpuBefore).Microseconds())/ops, "redis-cpu-us/op")
	b.ReportMetric(float64(trips.Load()-tripsBefore-2)/ops, "round-trips/op")
	var calls int64
	for name, c := range cmdsAfter {
		if name != "info" {
			calls += c - cmdsBefore[name]
		}
	}
	b.ReportMetric(float64(calls)/ops, "redis-cmds/op")
}

// BenchmarkCycle is one allocate + release through the allocator, on a
// chain whose first two tiers are empty (the walk the predecessor paid
// round trips for).
func BenchmarkCycle(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			ctx := context.Background()
			srv := testredis.Start(b, testredis.TCP())
			rdb := srv.Client()
			trips := &testredis.RoundTrips{}
			rdb.AddHook(trips)
			a := allocatortest.New(b, rdb)
			for i := range 64 {
				register(b, a, "basic", fmt.Sprintf("shared-%d", i))
			}
			if err := a.Preload(ctx); err != nil {
				b.Fatal(err)
			}
			measure(b, srv, rdb, trips, parallel, func(i int64) {
				call := "CA" + strconv.FormatInt(i, 10)
				if _, err := a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: "acme"}); err != nil {
					b.Fatal(err)
				}
				if _, err := a.Release(ctx, call); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkPredecessorCycle replays the predecessor's commands for the same
// cycle (seeds 000, "Allocation Flow"): idempotency script, merchant lookup,
// SPOP misses on gold and standard, the shared script, five stores; then the
// seven release commands. Same Redis, same run: the side-by-side baseline.
func BenchmarkPredecessorCycle(b *testing.B) {
	ctx := context.Background()
	srv := testredis.Start(b, testredis.TCP())
	rdb := srv.Client()
	trips := &testredis.RoundTrips{}
	rdb.AddHook(trips)
	for i := range 64 {
		rdb.ZAdd(ctx, "voice:pool:basic:available", redis.Z{Member: fmt.Sprintf("shared-%d", i)})
	}
	lock := redis.NewScript(`local e = redis.call('HGETALL', KEYS[1]) if #e > 0 then return e end
redis.call('HSET', KEYS[1], '_lock', '1') redis.call('EXPIRE', KEYS[1], 30) return {}`)
	shared := redis.NewScript(`local r = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #r, 2 do if tonumber(r[i+1]) >= tonumber(ARGV[1]) then return nil end
if redis.call('EXISTS', 'voice:pod:draining:' .. r[i]) == 0 then redis.call('ZINCRBY', KEYS[1], 1, r[i]) return r[i] end end return nil`)
	release := redis.NewScript(`local s = redis.call('ZSCORE', KEYS[1], ARGV[1]) if s and tonumber(s) > 0 then return redis.call('ZINCRBY', KEYS[1], -1, ARGV[1]) end return 0`)
	measure(b, srv, rdb, trips, false, func(i int64) {
		call := "voice:call:CA" + strconv.FormatInt(i, 10)
		lock.Run(ctx, rdb, []string{call})
		rdb.HGet(ctx, "voice:merchant:config", "acme")
		rdb.SPop(ctx, "voice:pool:gold:available")
		rdb.SPop(ctx, "voice:pool:standard:available")
		pod, err := shared.Run(ctx, rdb, []string{"voice:pool:basic:available"}, 3).Text()
		if err != nil {
			b.Fatal(err)
		}
		rdb.HSet(ctx, call, "pod_name", pod, "source_pool", "pool:basic", "merchant_id", "acme", "allocated_at", "1")
		rdb.HDel(ctx, call, "_lock")
		rdb.Expire(ctx, call, 3600e9)
		rdb.HSet(ctx, "voice:pod:"+pod, "status", "allocated", "allocated_call_sid", call, "allocated_at", "1", "source_pool", "pool:basic")
		rdb.Set(ctx, "voice:lease:"+pod, call, 900e9)
		// release
		rdb.HGetAll(ctx, call)
		rdb.Exists(ctx, "voice:pod:draining:"+pod)
		release.Run(ctx, rdb, []string{"voice:pool:basic:available"}, pod)
		rdb.Del(ctx, "voice:lease:"+pod)
		rdb.HSet(ctx, "voice:pod:"+pod, "status", "available", "released_at", "2")
		rdb.Del(ctx, call)
	})
}
