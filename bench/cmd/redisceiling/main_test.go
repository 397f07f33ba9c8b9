package main

import (
	"strings"
	"testing"
	"time"
)

// TestHoldsTheCallsItIsAskedFor runs the generator small and short on a
// redis-server of its own: the calls it reports held must be the calls it
// was asked for, every socket's lease renewed at its replica's pass, no
// operation failed, and Redis' CPU seen, on one server and on a Cluster
// (where one node holds every key).
func TestHoldsTheCallsItIsAskedFor(t *testing.T) {
	for _, cluster := range []int{0, 3} {
		o := options{replicas: 2, duration: time.Minute, resumable: 0.5, callback: true, slots: 4, headroom: 1.5,
			merchants: 5, warmup: 0, window: 4500 * time.Millisecond, scrape: time.Second, workers: 16,
			cluster: cluster, renew: time.Second, lifecycles: 20}
		r, err := run(o, 200)
		if err != nil {
			t.Fatal(err)
		}
		// Calls of a minute on average, at 200 / 60 a second: the count
		// moves by a few over the window.
		if r.live < 180 || r.live > 220 {
			t.Errorf("cluster %d: held %.0f calls on average, asked for 200", cluster, r.live)
		}
		// Four passes a replica are due in the window: every socket's
		// lease renewed at least once, even with passes late on a loaded
		// machine (one pass of the window's four was seen to miss it).
		if r.renewed < 200 {
			t.Errorf("cluster %d: %d leases renewed in a window of four passes a replica, want every socket's", cluster, r.renewed)
		}
		if r.notHeld > 10 {
			t.Errorf("cluster %d: %d renewals not held (only calls ending meanwhile may be)", cluster, r.notHeld)
		}
		if len(r.errors) > 0 {
			t.Errorf("cluster %d: operations failed: %v", cluster, r.errors)
		}
		if len(r.shares) != max(cluster, 1) {
			t.Fatalf("cluster %d: CPU of %d nodes", cluster, len(r.shares))
		}
		var cpu float64
		for _, s := range r.shares {
			cpu += s
		}
		if cpu <= 0 {
			t.Errorf("cluster %d: no Redis CPU seen: %v", cluster, r.shares)
		}
		busy := 0
		for _, n := range r.nodeCommands {
			if n > 20 { // an idle node answers INFO and the cluster client's topology reads
				busy++
			}
		}
		if busy != 1 {
			t.Errorf("cluster %d: commands/s per node %v: want one node doing edge's work", cluster, r.nodeCommands)
		}
		if !strings.Contains(r.attribution, "renewal (batched)") || !strings.Contains(r.attribution, "allocate") {
			t.Errorf("cluster %d: the parts were not costed:\n%s", cluster, r.attribution)
		}
	}
}
