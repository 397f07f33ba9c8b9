// Command rediscycles runs allocate+release cycles one after another
// through the allocator's API against the redis-server at -addr, with the
// pools of BenchmarkRedisCycle (bench/redis_cycle_bench_test.go): gold 40
// and standard 100 exclusive pods, basic 60 shared pods of 3 calls, each
// call with a merchant, the replica named and beaten 25 times as one is
// 25 s after its start. It prints nothing on success.
//
// It is the load of bench/redis-instructions.sh, which counts Redis'
// instructions per cycle under callgrind: a count the machine's other
// work does not move, unlike Redis' CPU time in the benchmark, so a step
// of a few percent shows. Serial cycles, so that the count is Redis'
// work per cycle and nothing of the interleaving of many clients.
//
//	go run ./bench/cmd/rediscycles -addr 127.0.0.1:6379 -n 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "redis-server to drive (its data is flushed)")
	n := flag.Int("n", 1000, "allocate+release cycles")
	flag.Parse()
	if err := run(*addr, *n); err != nil {
		fmt.Fprintln(os.Stderr, "rediscycles:", err)
		os.Exit(1)
	}
}

func run(addr string, n int) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return err
	}
	a, err := allocator.New(rdb, allocator.Config{
		LeaseTTL: time.Minute, CallInfoTTL: time.Hour, DrainingTTL: 6 * time.Minute,
		Tiers: allocator.TierConfig{
			Tiers: map[string]allocator.Tier{
				"gold":     {Type: allocator.Exclusive, Target: 40},
				"standard": {Type: allocator.Exclusive, Target: 100},
				"basic":    {Type: allocator.Shared, Target: 60, MaxConcurrent: 3},
			},
			DefaultChain: []string{"gold", "standard", "basic"},
		},
	}, nil)
	if err != nil {
		return err
	}
	for tier, pods := range map[string]int{"gold": 40, "standard": 100, "basic": 60} {
		for i := range pods {
			pod := allocator.Pod{Name: tier + "-" + strconv.Itoa(i), Tier: tier, Address: "127.0.0.1:9"}
			if _, err := a.RegisterPod(ctx, pod); err != nil {
				return err
			}
		}
	}
	if err := a.Preload(ctx); err != nil {
		return err
	}
	a.SetReplica("bench")
	for range 25 {
		if _, err := a.Heartbeat(ctx, "bench"); err != nil {
			return err
		}
	}
	for i := range n {
		call := "CA" + strconv.Itoa(i)
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := a.Allocate(actx, allocator.Request{CallID: call, MerchantID: "acme", Creator: "token:bench"})
		cancel()
		if err != nil {
			return err
		}
		if _, err := a.Release(ctx, call); err != nil {
			return err
		}
	}
	return nil
}
