package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
)

// BenchmarkAPICycle is one allocate + release through edge's HTTP API: a
// real edge process on a real Redis, driven over keep-alive connections.
// Besides ns/op it reports the CPU the edge process and Redis spent per
// cycle (the goal: at most 200 us and 100 us).
func BenchmarkAPICycle(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			srv := testredis.Start(b, testredis.TCP())
			rdb := srv.Client()
			var pods []string
			for i := range 32 {
				pods = append(pods, fmt.Sprintf(`{"name":"agent-%d","address":"127.0.0.1:9","tier":"standard"}`, i))
			}
			// The generic API takes a caller's token, as in production.
			const token = "bench-token-0123456789"
			cfg := filepath.Join(b.TempDir(), "edge.yaml")
			os.WriteFile(cfg, []byte("generic_api:\n  tokens:\n    - {name: bench, token: "+token+", merchants: [\"*\"]}\n"), 0o600)
			edge := edgetest.Start(b, []string{"--redis-url", srv.URL(), "--config", cfg},
				"EDGE_PODS__STATIC=["+strings.Join(pods, ",")+"]")
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			post := func(url, body string) map[string]any {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %d %s", url, resp.StatusCode, raw)
				}
				var out map[string]any
				json.Unmarshal(raw, &out)
				return out
			}
			var n atomic.Int64
			cycle := func() {
				call := "CA" + strconv.FormatInt(n.Add(1), 10)
				post(edge.PublicURL+"/api/v1/allocate", `{"call_sid":"`+call+`","merchant_id":"acme"}`)
				post(edge.AdminURL+"/api/v1/release", `{"call_sid":"`+call+`"}`)
			}
			cycle() // warm up connections and scripts

			edgeBefore, redisBefore := edge.CPU(), srv.CPU(context.Background(), rdb)
			evalBefore := srv.CommandStats(context.Background(), rdb)
			start := n.Load()
			b.ResetTimer()
			if parallel {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						cycle()
					}
				})
			} else {
				for b.Loop() {
					cycle()
				}
			}
			b.StopTimer()
			ops := float64(n.Load() - start)
			evalAfter := srv.CommandStats(context.Background(), rdb)
			b.ReportMetric(float64((edge.CPU()-edgeBefore).Microseconds())/ops, "edge-cpu-us/op")
			b.ReportMetric(float64((srv.CPU(context.Background(), rdb)-redisBefore).Microseconds())/ops, "redis-cpu-us/op")
			b.ReportMetric(float64(evalAfter["evalsha"]+evalAfter["eval"]-evalBefore["evalsha"]-evalBefore["eval"])/ops, "scripts/op")
		})
	}
}
