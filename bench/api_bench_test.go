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
// cycle (the goal in docs/benchmarks.md: at most 100 us of edge CPU at 16
// clients).
//
// Side by side in the same run, each on its own Redis with its own clients
// (ns/op is then per cycle of any of them):
//   - EDGE_BASE_BINARY=<edge binary>: another edge, e.g. the commit before a
//     change ("base-" metrics);
//   - EDGE_BENCH_FLOOR=1: bench/cmd/apifloor, net/http and go-redis with a
//     trivial script and none of edge's work: what the libraries cost
//     ("floor-" metrics).
//
// EDGE_BENCH_PROFILE=<prefix> saves CPU and allocation profiles of the
// edge process, taken over the first EDGE_BENCH_PROFILE_SECONDS (default 5)
// of each timed loop (give -benchtime enough cycles to fill it).
func BenchmarkAPICycle(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		b.Run(map[bool]string{false: "serial", true: "parallel"}[parallel], func(b *testing.B) {
			targets := []cycleTarget{startEdge(b, edgetest.Binary(b), "")}
			targets[0].profile = func() <-chan struct{} { return profileEdge(b, targets[0].edge) }
			if bin := os.Getenv("EDGE_BASE_BINARY"); bin != "" {
				targets = append(targets, startEdge(b, bin, "base-"))
			}
			if os.Getenv("EDGE_BENCH_FLOOR") != "" {
				targets = append(targets, startFloor(b))
			}
			driveCycles(b, parallel, targets...)
		})
	}
}

// callerToken is the generic API's caller token (edge takes one, as in
// production; the floor ignores it).
const callerToken = "bench-token-0123456789"

// cycleTarget is a server a cycle benchmark drives, on its own Redis.
type cycleTarget struct {
	prefix                  string // of its metrics' names
	allocateURL, releaseURL string
	srv                     *testredis.Server
	cpu                     func() time.Duration
	edge                    *edgetest.Process // nil for the floor
	// profile starts profiling the server (nil: none); the channel closes
	// when the profiles are saved.
	profile func() <-chan struct{}
}

// startEdge runs bin with 32 static pods on a new Redis.
func startEdge(b *testing.B, bin, prefix string) cycleTarget {
	srv := testredis.Start(b, testredis.TCP())
	var pods []string
	for i := range 32 {
		pods = append(pods, fmt.Sprintf(`{"name":"agent-%d","address":"127.0.0.1:9","tier":"standard"}`, i))
	}
	cfg := filepath.Join(b.TempDir(), "edge.yaml")
	os.WriteFile(cfg, []byte("generic_api:\n  tokens:\n    - {name: bench, token: "+callerToken+", merchants: [\"*\"]}\n"), 0o600)
	edge := edgetest.StartBinary(b, bin, []string{"--redis-url", srv.URL(), "--config", cfg},
		"EDGE_PODS__STATIC=["+strings.Join(pods, ",")+"]")
	return cycleTarget{
		prefix: prefix, srv: srv, cpu: edge.CPU, edge: edge,
		allocateURL: edge.PublicURL + "/api/v1/allocate", releaseURL: edge.AdminURL + "/api/v1/release",
	}
}

// startFloor builds and runs bench/cmd/apifloor on a new Redis.
func startFloor(b *testing.B) cycleTarget {
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
	return cycleTarget{
		prefix: "floor-", srv: srv,
		allocateURL: "http://" + addr + "/api/v1/allocate", releaseURL: "http://" + addr + "/api/v1/release",
		cpu: func() time.Duration {
			d, err := edgetest.ProcessCPU(cmd.Process.Pid)
			if err != nil {
				b.Fatal(err)
			}
			return d
		},
	}
}

// driveCycles runs b.N allocate + release cycles, shared among the targets:
// from one client taking them in turn, or from parallelClients per target.
// It reports each server's and its Redis' CPU per cycle it served.
func driveCycles(b *testing.B, parallel bool, targets ...cycleTarget) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	post := func(url, body string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+callerToken)
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
	done := make([]atomic.Int64, len(targets)) // cycles per target
	cycle := func(k int) {
		t := targets[k]
		call := "CA" + strconv.FormatInt(n.Add(1), 10)
		post(t.allocateURL, `{"call_sid":"`+call+`","merchant_id":"acme"}`)
		post(t.releaseURL, `{"call_sid":"`+call+`"}`)
		done[k].Add(1)
	}
	for k := range targets {
		cycle(k) // warm up connections and scripts
	}

	type reading struct {
		server, redis time.Duration
		scripts       int64
	}
	read := func(t cycleTarget) reading {
		ctx, rdb := context.Background(), t.srv.Client()
		stats := t.srv.CommandStats(ctx, rdb)
		return reading{t.cpu(), t.srv.CPU(ctx, rdb), stats["evalsha"] + stats["eval"]}
	}
	var waits []<-chan struct{}
	for _, t := range targets {
		if t.profile != nil {
			waits = append(waits, t.profile())
		}
	}
	before := make([]reading, len(targets))
	for k, t := range targets {
		before[k] = read(t)
	}
	start := make([]int64, len(targets))
	for k := range targets {
		start[k] = done[k].Load()
	}
	b.ResetTimer()
	if parallel {
		// 16 clients per target whatever GOMAXPROCS is (the goal is set
		// at 16): RunParallel starts parallelism x GOMAXPROCS goroutines,
		// each of which keeps to one target.
		b.SetParallelism(max(1, parallelClients*len(targets)/runtime.GOMAXPROCS(0)))
		var clients atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			k := int(clients.Add(1)) % len(targets)
			for pb.Next() {
				cycle(k)
			}
		})
	} else {
		// One client taking the targets in turn.
		i := 0
		for b.Loop() {
			cycle(i % len(targets))
			i++
		}
	}
	b.StopTimer()
	for _, w := range waits {
		<-w
	}
	for k, t := range targets {
		after := read(t)
		ops := float64(done[k].Load() - start[k])
		server := "edge-cpu-us/op"
		if t.edge == nil {
			server = "cpu-us/op"
		}
		b.ReportMetric(float64((after.server-before[k].server).Microseconds())/ops, t.prefix+server)
		b.ReportMetric(float64((after.redis-before[k].redis).Microseconds())/ops, t.prefix+"redis-cpu-us/op")
		b.ReportMetric(float64(after.scripts-before[k].scripts)/ops, t.prefix+"scripts/op")
	}
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
