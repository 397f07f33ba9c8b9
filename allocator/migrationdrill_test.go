package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// drillState is one state the migration runbook (docs/migration.md) passes
// through: which router the providers' webhooks and the agents'
// allocate and release reach, where the predecessor's media URLs land
// (nginx, or edge once its hostname moved), whether edge runs (its leader
// loops) and in migration mode.
type drillState struct {
	name             string
	webhooks, agents string // "pred" or "edge"
	predMediaOnEdge  bool
	edge, migration  bool
}

// runbook is docs/migration.md's order, forward and then every rollback in
// reverse; "wait" marks a state entered only once no call the predecessor
// allocated is live (step 4 waits for it).
var runbook = []drillState{
	{name: "predecessor only", webhooks: "pred", agents: "pred"},
	{name: "1. both routers", webhooks: "pred", agents: "pred", edge: true, migration: true},
	{name: "2. webhooks on edge", webhooks: "edge", agents: "pred", edge: true, migration: true},
	{name: "3. agents on edge", webhooks: "edge", agents: "edge", edge: true, migration: true},
	{name: "wait 4. media hostname on edge", webhooks: "edge", agents: "edge", predMediaOnEdge: true, edge: true},
	{name: "5. predecessor removed", webhooks: "edge", agents: "edge", predMediaOnEdge: true, edge: true},
	{name: "rollback 5", webhooks: "edge", agents: "edge", predMediaOnEdge: true, edge: true},
	{name: "rollback 4", webhooks: "edge", agents: "edge", edge: true, migration: true},
	{name: "rollback 3", webhooks: "edge", agents: "pred", edge: true, migration: true},
	{name: "rollback 2", webhooks: "pred", agents: "pred", edge: true, migration: true},
	{name: "rollback 1", webhooks: "pred", agents: "pred"},
}

// oldRunbook is the order docs/migration.md had before: the media hostname
// moved while the agents' allocate still reached the predecessor.
var oldRunbook = []drillState{
	{name: "1. both routers", webhooks: "pred", agents: "pred", edge: true, migration: true},
	{name: "2. webhooks on edge", webhooks: "edge", agents: "pred", edge: true, migration: true},
	{name: "3. media hostname on edge", webhooks: "edge", agents: "pred", predMediaOnEdge: true, edge: true, migration: true},
	{name: "4. agents on edge", webhooks: "edge", agents: "edge", predMediaOnEdge: true, edge: true, migration: true},
}

// drillFigures counts what the calls of a drill saw.
type drillFigures struct {
	calls, refused, lost, doubles, leaked atomic.Int64
	mu                                    sync.Mutex
	why                                   map[string]int
}

func (f *drillFigures) note(kind *atomic.Int64, why string) {
	kind.Add(1)
	f.mu.Lock()
	f.why[why]++
	f.mu.Unlock()
}

// The migration drill: docs/migration.md's runbook run step by step, every
// rollback included, with calls never stopping, through both routers on one
// Redis: edge's allocator and the predecessor replayed from its command
// sequences (predecessor_test.go), edge's leader syncing and sweeping the
// pods throughout (kept out of the predecessor's SPOP-to-store window, as
// the predecessor's own zombie cleanup is not: that race is its own).
// Provider workers allocate through the router the webhooks reach, agent
// workers through the one the agents' allocate reaches; every call is
// released by the router the agents' release reaches. A call's media:
// edge's calls claim their socket with their token and renew while they
// last; the predecessor's calls reach their pod through nginx, or once its
// hostname points at edge, through edge's token-less admission (bound to a
// pod's one call). A call is lost when its media is refused, its renewal
// fails, or its release finds it ended; double-served when a second call
// gets its exclusive pod, or a shared pod more than max_concurrent calls.
// Once every call ended, every pod and slot must be free again (after a
// sweep). The runbook must lose none, double-serve none and leak none; the
// order it had before is run beside it for comparison (its figures are
// logged).
//
// Each state lasts 300ms here; `make migration-drill` runs 3s per state
// (EDGE_DRILL_STATE) and prints the figures docs/migration.md cites.
func TestMigrationDrill(t *testing.T) {
	per := 300 * time.Millisecond
	if s := os.Getenv("EDGE_DRILL_STATE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("EDGE_DRILL_STATE: %v", err)
		}
		per = d
	}
	f := drill(t, runbook, per)
	t.Logf("runbook: %s", f)
	if f.lost.Load() != 0 || f.doubles.Load() != 0 || f.leaked.Load() != 0 {
		t.Errorf("the runbook lost %d calls, double-served %d and leaked %d pods or slots: %v",
			f.lost.Load(), f.doubles.Load(), f.leaked.Load(), f.why)
	}
	// Ten slots for eight callers: a refusal is a pod or slot held by no
	// call (the predecessor's release window aside, a moment's).
	if r := f.refused.Load(); r*50 > f.calls.Load() {
		t.Errorf("%d calls refused for want of a pod beside %d served, with more slots than callers: %v", r, f.calls.Load(), f.why)
	}
	old := drill(t, oldRunbook, per)
	t.Logf("the order before (media moved while the predecessor allocates): %s", old)
}

func (f *drillFigures) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%d calls, %d refused (no pod), %d lost, %d double-served, %d pods or slots leaked %v",
		f.calls.Load(), f.refused.Load(), f.lost.Load(), f.doubles.Load(), f.leaked.Load(), f.why)
}

func drill(t *testing.T, states []drillState, per time.Duration) *drillFigures {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	ml := allocator.MediaLeases{Alloc: a}
	pods := map[string]string{"g0": "gold", "g1": "gold", "s0": "standard", "s1": "standard", "b0": "basic", "b1": "basic"}
	var names []string
	for pod, tier := range pods {
		register(t, a, tier, pod)
		names = append(names, pod)
	}
	maxShared := a.Config().Tiers.Tiers["basic"].MaxConcurrent
	window := &sync.RWMutex{}
	pred := &predecessor{rdb: rdb, k: a.Keys(), tiers: a.Config().Tiers, window: window}
	f := &drillFigures{why: map[string]int{}}

	// Who serves each pod now, as the callers see it: a call is on its pod
	// from its allocation until its media stops (before its release).
	var (
		mu       sync.Mutex
		changed  = sync.NewCond(&mu)
		onPod    = map[string]map[string]bool{}
		predLive int
	)
	take := func(call, pod string, byPred bool) {
		mu.Lock()
		defer mu.Unlock()
		if onPod[pod] == nil {
			onPod[pod] = map[string]bool{}
		}
		onPod[pod][call] = true
		if n := len(onPod[pod]); pods[pod] == "basic" && n > maxShared || pods[pod] != "basic" && n > 1 {
			f.note(&f.doubles, "double-served: "+pod)
		}
		if byPred {
			predLive++
		}
	}
	leave := func(call, pod string, byPred bool) {
		mu.Lock()
		defer mu.Unlock()
		delete(onPod[pod], call)
		if byPred {
			predLive--
		}
		changed.Broadcast()
	}

	var state atomic.Pointer[drillState]
	state.Store(&states[0])
	setMigration := func(on bool) {
		cfg := a.Config()
		cfg.Migration = on
		a.ApplyTTLs(cfg)
	}
	setMigration(states[0].migration)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	// edge's leader: the pod sync and the sweep, while edge runs.
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !state.Load().edge {
				continue
			}
			window.Lock()
			_, err := a.SyncPods(ctx, "", ready(names...))
			if err == nil {
				_, err = a.SweepPods(ctx, "", names)
			}
			window.Unlock()
			if err != nil {
				t.Errorf("leader loops: %v", err)
				return
			}
		}
	})
	const providers, agents = 6, 2
	for w := range providers + agents {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				st := state.Load()
				router := st.webhooks
				if w >= providers {
					router = st.agents
				}
				call := fmt.Sprintf("CA-%d-%d", w, i)
				drillCall(ctx, t, a, ml, pred, f, st, state.Load, router, call, rng, take, leave)
			}
		})
	}

	for i := range states {
		st := &states[i]
		if strings.HasPrefix(st.name, "wait ") {
			mu.Lock()
			for predLive > 0 {
				changed.Wait()
			}
			mu.Unlock()
		}
		if st.migration {
			setMigration(true) // before the routing changes
		}
		state.Store(st)
		if !st.migration {
			setMigration(false)
		}
		time.Sleep(per) // the state's duration: load runs meanwhile
	}
	close(stop)
	wg.Wait()
	// Every call ended: after a sweep, every pod is free again.
	sweepAll(t, a, names...)
	for pod, tier := range pods {
		k := a.Keys()
		if tier == "basic" {
			if s := score(t, rdb, a, tier, pod); s != 0 {
				f.note(&f.leaked, fmt.Sprintf("shared pod %s: score %v with no call", pod, s))
			}
		} else if !rdb.SIsMember(ctx, k.PoolAvailable(tier), pod).Val() {
			f.note(&f.leaked, "exclusive pod "+pod+" not back in its pool")
		}
	}
	return f
}

// drillCall is one call's life: allocation through router, its media, its
// hold with the socket renewing, its release through the router the
// agents' release reaches then.
func drillCall(ctx context.Context, t *testing.T, a *allocator.Allocator, ml allocator.MediaLeases, pred *predecessor,
	f *drillFigures, st *drillState, now func() *drillState, router, call string, rng *rand.Rand,
	take, leave func(call, pod string, byPred bool)) {
	byPred := router == "pred"
	var pod string
	if byPred {
		pod = pred.allocate(ctx, call)
	} else {
		al, err := a.Allocate(ctx, allocator.Request{CallID: call})
		if err != nil && !errors.Is(err, allocator.ErrNoCapacity) {
			t.Errorf("edge allocate %s: %v", call, err)
			return
		}
		pod = al.PodName
	}
	if pod == "" {
		f.note(&f.refused, "refused by "+router+" in "+now().name)
		time.Sleep(time.Millisecond) // the next call comes a moment later
		return
	}
	f.calls.Add(1)
	take(call, pod, byPred)
	holder := call + "/socket"
	lost := ""
	switch {
	case !byPred:
		if _, err := a.ClaimMedia(ctx, call, pod, holder); err != nil {
			lost = "edge call's media refused"
		}
	case st.predMediaOnEdge:
		if c, err := ml.PodCall(ctx, pod); err != nil || c != call {
			lost = "predecessor call's token-less media refused"
		}
	}
	end := time.Now().Add(time.Duration(2+rng.IntN(20)) * time.Millisecond)
	for lost == "" && time.Now().Before(end) {
		if !byPred {
			held, err := a.Renew(ctx, []allocator.Lease{{CallID: call, PodName: pod, Holder: holder}})
			if err != nil || !held[0] {
				lost = "edge call's lease lost"
			}
		}
		time.Sleep(time.Millisecond) // the call talks; its socket renews meanwhile
	}
	leave(call, pod, byPred)
	// The agent releases the call through the router its release reaches
	// now (a refused call's agent releases it too).
	released := true
	if now().agents == "pred" {
		released = pred.release(ctx, call)
	} else if r, err := a.Release(ctx, call); err != nil {
		released = false
	} else if r.Stale {
		released = false
	}
	if lost == "" && !released {
		lost = "ended before its release (" + router + ")"
	}
	if lost != "" {
		f.note(&f.lost, lost)
	}
}
