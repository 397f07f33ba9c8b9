package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/testredis"
)

// BenchmarkRedisCycle is what one allocate + release costs Redis: the
// allocator on a real redis-server (loopback TCP), its pools seeded as a
// deployment's (gold 40 and standard 100 exclusive pods, basic 60 shared
// pods of 3 slots; default chain gold, standard, basic), driven by 16
// clients in a closed loop, each cycle a new call with a merchant, its
// allocate under a webhook's 5 s deadline, the replica named as
// cmd/edge names it. Per cycle it reports Redis' CPU
// (INFO cpu, used_cpu_user + used_cpu_sys), the commands Redis ran (INFO
// commandstats: EVALSHA and every command inside the scripts) and the
// client's round trips; EDGE_BENCH_COMMANDS=1 logs the commands one by
// one.
//
// Beside it, on a Redis of its own in the same run ("floor-" metrics): the
// same cycle as the fewest plain commands it needs, in the same two round
// trips (two scripts): look the call up, its tombstone and its ended mark,
// take a pod, write the call, its pod and its lease; then read the call,
// give the pod back, clear its lease and state, and leave a tombstone and
// a mark. What edge adds over that is its guarantees (admission, waits,
// ejection, recovery, the predecessor's records).
//
//	go test -run '^$' -bench RedisCycle -benchtime 20000x -count 3 ./bench/
func BenchmarkRedisCycle(b *testing.B) {
	b.Run("edge", func(b *testing.B) {
		ctx := context.Background()
		srv := testredis.Start(b, testredis.TCP())
		rdb := srv.Client()
		a, err := CycleAllocator(ctx, rdb)
		if err != nil {
			b.Fatal(err)
		}
		driveRedisCycles(b, srv, rdb, func(call string) {
			if err := Cycle(ctx, a, call); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("predecessor", func(b *testing.B) {
		ctx := context.Background()
		srv := testredis.Start(b, testredis.TCP())
		rdb := srv.Client()
		for i := range 40 {
			rdb.SAdd(ctx, "voice:pool:gold:available", fmt.Sprintf("gold-%d", i))
		}
		driveRedisCycles(b, srv, rdb, func(call string) { predecessorCycle(ctx, b, rdb, call) })
	})
	b.Run("floor", func(b *testing.B) {
		ctx := context.Background()
		srv := testredis.Start(b, testredis.TCP())
		rdb := srv.Client()
		for i := range 40 {
			rdb.SAdd(ctx, "voice:pool:gold:available", fmt.Sprintf("gold-%d", i))
		}
		driveRedisCycles(b, srv, rdb, func(call string) {
			keys := []string{"voice:call:" + call, "voice:call_ended:" + call, "voice:ended:" + strconv.Itoa(allocator.EndedShard(call)),
				"voice:pool:gold:available"}
			if err := floorAllocate.Run(ctx, rdb, keys, call, "acme", 60000, 3600000).Err(); err != nil {
				b.Fatal(err)
			}
			if err := floorRelease.Run(ctx, rdb, keys, call, 3600000).Err(); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// predecessorCycle replays the predecessor's commands for one cycle on an
// exclusive pod (seeds 000, "Allocation Flow", as allocator's
// BenchmarkPredecessorCycle replays them): its idempotency script, the
// merchant lookup, the pop, five stores; then its seven release commands.
func predecessorCycle(ctx context.Context, b *testing.B, rdb *redis.Client, call string) {
	key := "voice:call:" + call
	predecessorLock.Run(ctx, rdb, []string{key})
	rdb.HGet(ctx, "voice:merchant:config", "acme")
	pod, err := rdb.SPop(ctx, "voice:pool:gold:available").Result()
	if err != nil {
		b.Fatal(err)
	}
	rdb.HSet(ctx, key, "pod_name", pod, "source_pool", "pool:gold", "merchant_id", "acme", "allocated_at", "1")
	rdb.HDel(ctx, key, "_lock")
	rdb.Expire(ctx, key, time.Hour)
	rdb.HSet(ctx, "voice:pod:"+pod, "status", "allocated", "allocated_call_sid", call, "allocated_at", "1", "source_pool", "pool:gold")
	rdb.Set(ctx, "voice:lease:"+pod, call, 15*time.Minute)
	rdb.HGetAll(ctx, key)
	rdb.Exists(ctx, "voice:pod:draining:"+pod)
	rdb.Del(ctx, "voice:lease:"+pod)
	rdb.SAdd(ctx, "voice:pool:gold:available", pod)
	rdb.HSet(ctx, "voice:pod:"+pod, "status", "available", "released_at", "2")
	rdb.Del(ctx, key)
}

var predecessorLock = redis.NewScript(`local e = redis.call('HGETALL', KEYS[1]) if #e > 0 then return e end
redis.call('HSET', KEYS[1], '_lock', '1') redis.call('EXPIRE', KEYS[1], 30) return {}`)

// The floor's two scripts: 9 and 8 plain commands.
var (
	floorAllocate = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'pod_name') or redis.call('EXISTS', KEYS[2]) == 1
    or redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  return nil
end
local pod = redis.call('SPOP', KEYS[4])
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'pod_name', pod, 'source_pool', 'pool:gold', 'merchant_id', ARGV[2], 'allocated_at', t[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('HSET', 'voice:pod:' .. pod, 'status', 'allocated', 'allocated_call_sid', ARGV[1], 'allocated_at', t[1])
redis.call('SET', 'voice:lease:' .. pod, ARGV[1], 'PX', ARGV[3])
return pod`)
	floorRelease = redis.NewScript(`
local call = redis.call('HGETALL', KEYS[1])
local pod
for i = 1, #call, 2 do if call[i] == 'pod_name' then pod = call[i + 1] end end
if not pod then return nil end
local t = redis.call('TIME')
redis.call('DEL', KEYS[1], 'voice:lease:' .. pod)
redis.call('SADD', KEYS[4], pod)
redis.call('HSET', 'voice:pod:' .. pod, 'status', 'available', 'allocated_call_sid', '', 'released_at', t[1])
redis.call('HSET', KEYS[2], 'how', 'released', 'ended_at', t[1], unpack(call))
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], t[1] * 4000, ARGV[1])
return pod`)
)

// driveRedisCycles runs b.N cycles from 16 clients and reports Redis' CPU,
// commands and the client's round trips per cycle.
func driveRedisCycles(b *testing.B, srv *testredis.Server, rdb *redis.Client, cycle func(call string)) {
	ctx := context.Background()
	trips := &testredis.RoundTrips{}
	rdb.AddHook(trips)
	var n atomic.Int64
	next := func() string { return "CA" + strconv.FormatInt(n.Add(1), 10) }
	cycle(next()) // load the scripts
	stats := srv.CommandStats(ctx, rdb)
	cpu := srv.CPU(ctx, rdb)
	tripsBefore := trips.Load()
	b.ResetTimer()
	b.SetParallelism(max(1, parallelClients/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cycle(next())
		}
	})
	b.StopTimer()
	// The readings are round trips of their own: none is counted.
	tripsAfter := trips.Load()
	cpuAfter := srv.CPU(ctx, rdb)
	after := srv.CommandStats(ctx, rdb)
	var cmds int64
	var each []string
	for name, c := range after {
		cmds += c - stats[name]
		if c > stats[name] {
			each = append(each, fmt.Sprintf("%s %.2f", name, float64(c-stats[name])/float64(b.N)))
		}
	}
	if os.Getenv("EDGE_BENCH_COMMANDS") != "" {
		slices.Sort(each)
		b.Logf("commands per cycle: %s", strings.Join(each, ", "))
	}
	ops := float64(b.N)
	b.ReportMetric(float64((cpuAfter-cpu).Microseconds())/ops, "redis-cpu-us/op")
	b.ReportMetric(float64(cmds)/ops, "redis-cmds/op")
	b.ReportMetric(float64(tripsAfter-tripsBefore)/ops, "round-trips/op")
}
