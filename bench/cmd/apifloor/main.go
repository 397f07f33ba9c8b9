// Command apifloor is the floor of edge's API cycle: the same two requests
// (POST /api/v1/allocate, POST /api/v1/release, JSON in and out) served by
// net/http, each running one EVALSHA through go-redis, with none of edge's
// own work (no auth, no allocation logic, no logging, no metrics). Its CPU
// per cycle, measured by BenchmarkAPIFloor beside BenchmarkAPICycle, is
// what the libraries edge is built on cost on the machine at hand: the
// part of edge's figure that edge's own code cannot remove (docs/benchmarks.md).
//
//	apifloor -redis-url redis://127.0.0.1:6379/0
//
// It prints "listening <addr>" on stdout once it serves on 127.0.0.1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/redis/go-redis/v9"
)

// script stands in for the allocator's allocate and release scripts: one
// round trip that returns a short array, as they do.
var script = redis.NewScript(`return {'ok', ARGV[1], 'agent-1'}`)

func main() {
	url := flag.String("redis-url", "", "Redis to run the script on")
	flag.Parse()
	if err := run(*url); err != nil {
		fmt.Fprintln(os.Stderr, "apifloor:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := script.Load(context.Background(), rdb).Err(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /api/v1/allocate", cycleStep(rdb))
	mux.Handle("POST /api/v1/release", cycleStep(rdb))
	fmt.Println("listening", ln.Addr())
	return http.Serve(ln, mux)
}

// cycleStep decodes {"call_sid": ...}, runs the script and answers JSON.
func cycleStep(rdb *redis.Client) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			CallSID string `json:"call_sid"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := script.Run(r.Context(), rdb, []string{"call:" + body.CallSID}, body.CallSID).StringSlice()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"success": true, "pod_name": res[2]})
	}
}
