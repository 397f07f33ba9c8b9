package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
)

// parallelClients is how many clients the parallel mode runs.
const parallelClients = 16

// BenchmarkAPICycle is one allocate + release through edge's HTTP API: a
// real edge process on a real Redis, driven over keep-alive connections.
// Besides ns/op it reports the CPU the edge process and Redis spent per
// cycle (issue 12's goal: at most 100 us of edge CPU at 16 clients).
//
// EDGE_BENCH_PROFILE=<prefix> saves CPU and allocation profiles of the
// edge process, taken over the first EDGE_BENCH_PROFILE_SECONDS (default 5)
// of each timed loop (give -benchtime enough cycles to fill it).
func BenchmarkAPICycle(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			srv := testredis.Start(b, testredis.TCP())
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
			driveCycles(b, srv, cycleTarget{
				allocateURL: edge.PublicURL + "/api/v1/allocate", releaseURL: edge.AdminURL + "/api/v1/release",
				token: token, cpu: edge.CPU, profile: func() <-chan struct{} { return profileEdge(b, edge) },
			}, parallel)
		})
	}
}

// BenchmarkAPIFloor is BenchmarkAPICycle's parallel mode against
// bench/cmd/apifloor: net/http and go-redis with one trivial script per
// request and none of edge's own work. Run beside BenchmarkAPICycle, its
// server CPU per cycle is the part of edge's that the libraries cost.
func BenchmarkAPIFloor(b *testing.B) {
	srv := testredis.Start(b, testredis.TCP())
	bin := filepath.Join(b.TempDir(), "apifloor")
	build := exec.Command("go", "build", "-o", bin, "./cmd/apifloor")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build apifloor: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-redis-url", srv.URL())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		b.Fatalf("apifloor did not say where it listens: %q %v", line, err)
	}
	cpu := func() time.Duration {
		d, err := edgetest.ProcessCPU(cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	b.Run("parallel", func(b *testing.B) {
		driveCycles(b, srv, cycleTarget{
			allocateURL: "http://" + addr + "/api/v1/allocate", releaseURL: "http://" + addr + "/api/v1/release",
			token: "unused-by-the-floor", cpu: cpu,
		}, true)
	})
}

// cycleTarget is the server a cycle benchmark drives.
type cycleTarget struct {
	allocateURL, releaseURL string
	token                   string
	cpu                     func() time.Duration
	// profile starts profiling the server (nil: none); the channel closes
	// when the profiles are saved.
	profile func() <-chan struct{}
}

// driveCycles runs b.N allocate + release cycles against t, from one
// client or from parallelClients, and reports the server's and Redis' CPU
// per cycle.
func driveCycles(b *testing.B, srv *testredis.Server, t cycleTarget, parallel bool) {
	rdb := srv.Client()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(url, body string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+t.token)
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
		if err := json.Unmarshal(raw, &out); err != nil || out["success"] != true {
			b.Fatalf("%s: %s", url, raw)
		}
	}
	var n atomic.Int64
	cycle := func() {
		call := "CA" + strconv.FormatInt(n.Add(1), 10)
		post(t.allocateURL, `{"call_sid":"`+call+`","merchant_id":"acme"}`)
		post(t.releaseURL, `{"call_sid":"`+call+`"}`)
	}
	cycle() // warm up connections and scripts

	profiled := make(chan struct{})
	close(profiled) // nothing to wait for unless a profile is taken
	var wait <-chan struct{} = profiled
	if t.profile != nil {
		wait = t.profile()
	}
	serverBefore, redisBefore := t.cpu(), srv.CPU(context.Background(), rdb)
	evalBefore := srv.CommandStats(context.Background(), rdb)
	start := n.Load()
	b.ResetTimer()
	if parallel {
		// 16 clients whatever GOMAXPROCS is (issue 12 measures at 16):
		// RunParallel starts parallelism x GOMAXPROCS goroutines.
		b.SetParallelism(max(1, parallelClients/runtime.GOMAXPROCS(0)))
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
	<-wait
	ops := float64(n.Load() - start)
	evalAfter := srv.CommandStats(context.Background(), rdb)
	// "edge-cpu-us/op" also for the floor: the server's CPU, so that
	// benchstat lines the two up.
	b.ReportMetric(float64((t.cpu()-serverBefore).Microseconds())/ops, "edge-cpu-us/op")
	b.ReportMetric(float64((srv.CPU(context.Background(), rdb)-redisBefore).Microseconds())/ops, "redis-cpu-us/op")
	b.ReportMetric(float64(evalAfter["evalsha"]+evalAfter["eval"]-evalBefore["evalsha"]-evalBefore["eval"])/ops, "scripts/op")
}

// profileEdge starts fetching profiles of the edge process when
// EDGE_BENCH_PROFILE is set: <value>.cpu.<benchmark> and
// <value>.allocs.<benchmark> (allocations in the same window). The
// returned channel closes once both are saved (at once when none was asked
// for).
func profileEdge(b *testing.B, edge *edgetest.Process) <-chan struct{} {
	done := make(chan struct{})
	prefix := os.Getenv("EDGE_BENCH_PROFILE")
	if prefix == "" {
		close(done)
		return done
	}
	seconds := os.Getenv("EDGE_BENCH_PROFILE_SECONDS")
	if seconds == "" {
		seconds = "5"
	}
	name := strings.ReplaceAll(b.Name(), "/", "_")
	var wg sync.WaitGroup
	for _, kind := range []string{"cpu", "allocs"} {
		url := edge.AdminURL + "/debug/pprof/profile?seconds=" + seconds
		if kind == "allocs" {
			url = edge.AdminURL + "/debug/pprof/allocs?seconds=" + seconds
		}
		wg.Go(func() {
			if err := fetchProfile(url, prefix+"."+kind+"."+name); err != nil {
				b.Errorf("%s profile: %v", kind, err)
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}

func fetchProfile(url, path string) error {
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, raw)
	}
	return os.WriteFile(path, raw, 0o600)
}
