package allocator_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// predReset is what the predecessor's release writes in the pod info.
type predReset int

const (
	// resetStatus sets status "available" and released_at, as
	// predecessor.release replays it (the fields the run of its binary
	// showed written).
	resetStatus predReset = iota
	// resetClears also empties allocated_call_sid and allocated_at, as
	// the seeds document the releaser (001: "Releaser (clear)").
	resetClears
)

func (r predReset) String() string { return [...]string{"status only", "allocation cleared"}[r] }

// predStep is one Redis command of the predecessor's release.
type predStep struct {
	name string
	run  func()
}

// releaseSteps is the predecessor's release of call (predecessor.release),
// one step per Redis command in the order its binary sends them: read the
// call info, the two draining checks, return the pod (SADD to its
// available set, or the shared release script), DEL the pod's lease
// (whoever holds the pod by then), reset the pod info (status available,
// released_at), SREM the call from the pod's call set, DEL the call info
// (seeds 000 "Release (7 ops)"; the call set from its binary's writes);
// reset says which fields the pod info reset writes.
// A test runs them one by one, doing its own work between two; nothing
// of the predecessor's is atomic across them.
func (p *predecessor) releaseSteps(ctx context.Context, call string, reset predReset) []predStep {
	var pod, tier string
	var draining bool
	ck := p.k.Call(call)
	return []predStep{
		{"read call info", func() {
			info := p.rdb.HGetAll(ctx, ck).Val()
			pod, tier = info["pod_name"], strings.TrimPrefix(info["source_pool"], "pool:")
		}},
		{"draining checks", func() {
			draining = p.rdb.Exists(ctx, p.k.PodDraining(pod)).Val() == 1
			draining = p.rdb.Exists(ctx, p.k.PodDraining(pod)).Val() == 1 || draining
		}},
		{"return the pod", func() {
			avail := p.k.PoolAvailable(tier)
			if p.tiers.Tiers[tier].Type == allocator.Shared {
				predSharedRelease.Run(ctx, p.rdb, []string{avail}, pod)
			} else if !draining {
				p.rdb.SAdd(ctx, avail, pod)
			}
		}},
		{"DEL lease", func() { p.rdb.Del(ctx, p.k.Lease(pod)) }},
		{"reset pod info", func() {
			fields := []any{"status", "available", "released_at", strconv.FormatInt(time.Now().Unix(), 10)}
			if reset == resetClears {
				fields = append(fields, "allocated_call_sid", "", "allocated_at", "")
			}
			p.rdb.HSet(ctx, p.k.PodInfo(pod), fields...)
		}},
		{"SREM pod calls", func() { p.rdb.SRem(ctx, p.k.PredecessorPodCalls(pod), call) }},
		{"DEL call info", func() { p.rdb.Del(ctx, ck) }},
	}
}

// runSteps runs steps up to and including the one named through; "" runs
// them all. It returns the steps left.
func runSteps(t *testing.T, steps []predStep, through string) []predStep {
	t.Helper()
	for i, s := range steps {
		s.run()
		if s.name == through {
			return steps[i+1:]
		}
	}
	if through != "" {
		t.Fatalf("no step %q", through)
	}
	return nil
}
