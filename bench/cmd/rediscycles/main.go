// Command rediscycles runs allocate+release cycles one after another
// through the allocator's API against the redis-server at -addr, with
// BenchmarkRedisCycle's allocator and cycle (bench.CycleAllocator,
// bench.Cycle). It prints nothing on success.
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

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/bench"
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
	a, err := bench.CycleAllocator(ctx, rdb)
	if err != nil {
		return err
	}
	for i := range n {
		if err := bench.Cycle(ctx, a, "CA"+strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}
