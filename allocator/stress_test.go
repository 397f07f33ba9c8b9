package allocator_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// 64 workers run allocate/release cycles against a small pool; every
// allocate races a duplicate of itself and every release races a duplicate
// of itself and a replayed webhook of its call. The predecessor gave two
// pods to 50 of 50 duplicate pairs and returned pods twice under duplicate
// releases; edge must never, and a replay may see the live call or its
// tombstone, never a new pod.
func TestConcurrentDuplicatesKeepInvariants(t *testing.T) {
	concurrentDuplicates(t, testredis.Start(t).Client())
}

// The same with merchant caps in play: workers call for four
// merchants, three of them capped below what the pool could give them;
// besides the pool invariants, no merchant ever holds more live calls than
// its cap, and no count is left when all is released.
func TestConcurrentDuplicatesKeepInvariantsWithCaps(t *testing.T) {
	caps := map[string]int{"m0": 2, "m1": 3, "m2": 1}
	concurrentDuplicatesFor(t, testredis.Start(t).Client(), caps, func(w int) string { return fmt.Sprintf("m%d", w%4) })
}

// The same with waiting for capacity in play: two replicas on
// one Redis (each with its Waker, calls waiting up to 150ms), merchants
// capped as above, and the zombie sweep running throughout. Besides every
// invariant above, no wait is left behind (queue, ring, deadline, ticket).
func TestConcurrentDuplicatesKeepInvariantsWithWaiting(t *testing.T) {
	caps := map[string]int{"m0": 2, "m1": 3, "m2": 1}
	srv := testredis.Start(t)
	runStress(t, srv.Client(), stressOptions{
		caps:       caps,
		merchantOf: func(w int) string { return fmt.Sprintf("m%d", w%4) },
		wait:       150 * time.Millisecond,
		second:     srv.Client(),
		sweep:      true,
	})
	checkNoWaitKeys(t, srv.Client(), allocator.NewKeys(""))
}

// concurrentDuplicates is the test on any Redis (one server, a Cluster).
func concurrentDuplicates(t *testing.T, rdb redis.UniversalClient, mutate ...func(*allocator.Config)) {
	concurrentDuplicatesFor(t, rdb, nil, func(int) string { return "" }, mutate...)
}

// concurrentDuplicatesFor runs the test with worker w calling for
// merchantOf(w), merchants capped by caps.
func concurrentDuplicatesFor(t *testing.T, rdb redis.UniversalClient, caps map[string]int, merchantOf func(w int) string, mutate ...func(*allocator.Config)) {
	runStress(t, rdb, stressOptions{caps: caps, merchantOf: merchantOf, mutate: mutate})
}

// stressOptions vary the invariant test.
type stressOptions struct {
	caps       map[string]int
	merchantOf func(w int) string
	mutate     []func(*allocator.Config)
	// wait > 0: calls may wait that long for capacity; odd workers call
	// through a second allocator (another replica) on the client second.
	wait   time.Duration
	second redis.UniversalClient
	// sweep runs the zombie sweep over the pods throughout.
	sweep bool
}

func runStress(t *testing.T, rdb redis.UniversalClient, o stressOptions) {
	ctx := context.Background()
	caps, merchantOf := o.caps, o.merchantOf
	a := allocatortest.New(t, rdb, o.mutate...)
	replicaOf := func(int) *allocator.Allocator { return a }
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	if o.wait > 0 {
		a = waitingAllocator(t, rdb, o.wait, regA, o.mutate...)
		b := waitingAllocator(t, o.second, o.wait, regB, o.mutate...)
		replicaOf = func(w int) *allocator.Allocator {
			if w%2 == 1 {
				return b
			}
			return a
		}
	}
	for m, c := range caps {
		setMerchant(t, a, m, allocator.MerchantConfig{MaxCalls: capOf(c)})
	}
	pods := map[string]string{
		"gold-0": "gold", "gold-1": "gold",
		"std-0": "standard", "std-1": "standard", "std-2": "standard",
		"shared-0": "basic", "shared-1": "basic",
	}
	for pod, tier := range pods {
		register(t, a, tier, pod)
	}
	limit := map[string]int64{}
	for pod, tier := range pods {
		limit[pod] = 1
		if tier == "basic" {
			limit[pod] = 3
		}
	}

	const workers, cycles = 64, 60
	var (
		inUse              sync.Map // pod -> *atomic.Int64, calls the workers hold
		allocated, refused atomic.Int64
		violations         = make(chan string, 100)
	)
	counter := func(pod string) *atomic.Int64 {
		v, _ := inUse.LoadOrStore(pod, new(atomic.Int64))
		return v.(*atomic.Int64)
	}
	report := func(format string, args ...any) {
		select {
		case violations <- fmt.Sprintf(format, args...):
		default:
		}
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		merchant := merchantOf(w)
		a := replicaOf(w)
		go func() {
			defer wg.Done()
			for c := range cycles {
				call := fmt.Sprintf("CA-%d-%d", w, c)
				// Allocate twice at once: one pod for the call, or none.
				var dup allocator.Allocation
				var dupErr error
				done := make(chan struct{})
				go func() {
					dup, dupErr = a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: merchant})
					close(done)
				}()
				al, err := a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: merchant})
				<-done
				switch {
				case err == nil && dupErr == nil:
					if al.PodName != dup.PodName {
						report("call %s got two pods: %s and %s", call, al.PodName, dup.PodName)
					}
					if al.WasExisting == dup.WasExisting {
						report("call %s: exactly one of the duplicates must be new (got %v and %v)", call, al.WasExisting, dup.WasExisting)
					}
				case errors.Is(err, allocator.ErrNoCapacity) && errors.Is(dupErr, allocator.ErrNoCapacity):
					refused.Add(1)
					continue
				case err == nil || dupErr == nil:
					// One got a pod, its twin was refused before it: allowed,
					// the refused one ran first and wrote nothing.
					if err != nil {
						al = dup
					}
					if !errors.Is(err, allocator.ErrNoCapacity) && !errors.Is(dupErr, allocator.ErrNoCapacity) {
						report("call %s: unexpected errors %v / %v", call, err, dupErr)
						continue
					}
				default:
					report("call %s: allocate failed: %v / %v", call, err, dupErr)
					continue
				}
				allocated.Add(1)
				if n := counter(al.PodName).Add(1); n > limit[al.PodName] {
					report("pod %s holds %d calls, limit %d", al.PodName, n, limit[al.PodName])
				}
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) // the call
				counter(al.PodName).Add(-1)

				// Release twice at once, with a replayed webhook of the call
				// racing both: exactly one release succeeds, and the replay
				// gets the call's own pod (before the release) or
				// ErrCallEnded (after), never a pod of its own.
				var dupRel, replayErr error
				var replay allocator.Allocation
				var racing sync.WaitGroup
				racing.Add(2)
				go func() {
					defer racing.Done()
					_, dupRel = a.Release(ctx, call)
				}()
				go func() {
					defer racing.Done()
					replay, replayErr = a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: merchant})
				}()
				_, rel := a.Release(ctx, call)
				racing.Wait()
				switch {
				case replayErr == nil && (!replay.WasExisting || replay.PodName != al.PodName):
					report("call %s: replay during release got %+v, want its own pod or ErrCallEnded", call, replay)
				case replayErr != nil && !errors.Is(replayErr, allocator.ErrCallEnded):
					report("call %s: replay during release: %v", call, replayErr)
				}
				if _, err := a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: merchant}); !errors.Is(err, allocator.ErrCallEnded) {
					report("call %s: replay after release: %v, want ErrCallEnded", call, err)
				}
				if (rel == nil) == (dupRel == nil) {
					report("call %s: duplicate releases gave %v and %v, want one success and one not found", call, rel, dupRel)
				}
				for _, e := range []error{rel, dupRel} {
					if e != nil && !errors.Is(e, allocator.ErrCallNotFound) {
						report("call %s: release error %v", call, e)
					}
				}
			}
		}()
	}
	// Check the live invariants over all keys while the workers run.
	stop := make(chan struct{})
	sweeps := make(chan int)
	if o.sweep {
		names := slices.Collect(maps.Keys(pods))
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					sweeps <- n
					return
				default:
				}
				if _, err := a.SweepPods(ctx, "", names); err != nil {
					report("sweep: %v", err)
				}
				n++
			}
		}()
	}
	checked := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				checked <- n
				return
			default:
				checkLive(t, rdb, a, pods)
				for m, c := range caps {
					if got := merchantCallInfos(t, rdb, a.Keys(), m); got > c {
						report("merchant %s holds %d live calls, cap %d", m, got, c)
					}
				}
				n++
			}
		}
	}()
	wg.Wait()
	close(stop)
	snapshots := <-checked
	if o.sweep {
		t.Logf("%d sweeps ran alongside", <-sweeps)
	}
	if o.wait > 0 {
		var served, timedOut uint64
		for _, reg := range []*prometheus.Registry{regA, regB} {
			served += histogramCount(t, reg, "edge_admission_wait_seconds", "served")
			timedOut += histogramCount(t, reg, "edge_admission_wait_seconds", "timeout")
		}
		t.Logf("waits: %d served, %d timed out", served, timedOut)
		if served == 0 {
			t.Error("no call was served after waiting: the test exercised no hand-off")
		}
	}
	close(violations)
	for v := range violations {
		t.Error(v)
	}
	checkQuiescent(t, rdb, a, pods)
	for w := range workers {
		if m := merchantOf(w); m != "" && rdb.ZCard(ctx, a.Keys().MerchantCalls(m)).Val() != 0 {
			t.Errorf("merchant %s: calls still counted after every release", m)
		}
	}
	t.Logf("%d calls allocated, %d refused for capacity, %d live snapshots checked", allocated.Load(), refused.Load(), snapshots)
	if allocated.Load() < workers*cycles/10 {
		t.Errorf("only %d allocations succeeded: the test exercised too little", allocated.Load())
	}
}
