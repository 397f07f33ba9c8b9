package allocator_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/testredis"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator/allocatortest"
)

// BenchmarkEndedMarkMemory measures what keeping calls ended costs Redis
// per call (docs/security.md): the compact marks, against a key per call
// with the same TTL and the full record (the tombstone). The calls, with
// Twilio-shaped ids, end through sweep.lua as dead calls of a shared pod.
// Every mark of one ended_ttl is kept (24 h by default): at a million calls
// a day, about a million; EDGE_ENDED_CALLS sets how many (default
// 1,000,000).
//
//	EDGE_ENDED_CALLS=3000000 go test -run '^$' -bench EndedMarkMemory -benchtime 1x ./allocator
func BenchmarkEndedMarkMemory(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("EDGE_ENDED_CALLS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	rdb := testredis.Start(b).Client()
	// Upstream Redis' defaults (some distributions build with more).
	for _, name := range []string{"hash-max-listpack-entries", "zset-max-listpack-entries"} {
		if err := rdb.ConfigSet(ctx, name, "128").Err(); err != nil {
			b.Fatal(err)
		}
	}
	a := allocatortest.New(b, rdb)
	k := a.Keys()
	register(b, a, "basic", "s0")
	ids := make([]string, n)
	for i := range ids {
		var r [16]byte
		rand.Read(r[:])
		ids[i] = "CA" + hex.EncodeToString(r[:])
	}
	// In batches of 10,000, each function after its batch.
	pipeline := func(each func(p redis.Pipeliner, id string), after func(batch int)) {
		for start := 0; start < n; start += 10_000 {
			p := rdb.Pipeline()
			batch := ids[start:min(n, start+10_000)]
			for _, id := range batch {
				each(p, id)
			}
			if _, err := p.Exec(ctx); err != nil {
				b.Fatal(err)
			}
			if after != nil {
				after(len(batch))
			}
		}
	}
	used := func() int64 {
		info := rdb.Info(ctx, "memory").Val()
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		b.Fatal("no used_memory in INFO")
		return 0
	}
	deleteAll := func(pattern string) {
		keys := rdb.Keys(ctx, pattern).Val()
		for start := 0; start < len(keys); start += 10_000 {
			rdb.Del(ctx, keys[start:min(len(keys), start+10_000)]...)
		}
	}
	b.ResetTimer()
	for range b.N {
		// Live calls of s0 whose per-call leases ran out: the sweep ends
		// them all, each leaving its record and its mark (a batch per
		// sweep, within Redis' script time limit).
		pipeline(func(p redis.Pipeliner, id string) {
			p.HSet(ctx, k.Call(id), "pod_name", "s0", "source_pool", "pool:basic", "merchant_id", "acme",
				"allocated_at", "1700000000", "pool_type", "shared", "creator", "provider:twilio")
			p.ZAdd(ctx, k.PodCalls("s0"), redis.Z{Score: 1, Member: id})
		}, func(batch int) {
			res, err := a.SweepPods(ctx, "", []string{"s0"})
			if err != nil || res.CallsExpired != batch {
				b.Fatalf("sweep = %d calls ended, %v; want %d", res.CallsExpired, err, batch)
			}
		})
		withRecords := used()
		deleteAll(k.CallEnded("*"))
		marks := used()
		deleteAll(k.EndedMarks("*"))
		empty := used()
		pipeline(func(p redis.Pipeliner, id string) {
			p.Set(ctx, k.Prefix()+"ended_key:"+id, "released", 24*time.Hour)
		}, nil)
		perKey := used()
		deleteAll(k.Prefix() + "ended_key:*")
		b.ReportMetric(float64(marks-empty)/float64(n), "mark-B/call")
		b.ReportMetric(float64(perKey-empty)/float64(n), "key-B/call")
		b.ReportMetric(float64(withRecords-marks)/float64(n), "record-B/call")
	}
}
