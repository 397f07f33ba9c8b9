// Package outside tests edge from the outside: real edge processes (built
// and started by internal/edgetest) behind a readiness-honouring balancer,
// real Redis servers, the built-in providers as plugin processes and
// recording agents as pods; every verdict is what the pods and the
// provider saw. make faults-short runs its short form, make
// faults-outside its long one.
package outside

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// TestOutsideSuite is the fault suite as edge's users see it
// (docs/reliability.md, "Tested from the outside"): two replicas behind a
// balancer that honours /readyz, a real Redis (and a Sentinel
// deployment), the built-in providers as plugin processes, recording
// agents as pods, and a provider that posts signed Twilio webhooks and
// streams media through the balancer. Timings are edge's defaults. Each
// scenario injects one fault under a steady call load; its oracle is what
// the pods and the provider saw, never Redis. EDGE_FAULT_SUITE=short (make
// faults-short: fewer and shorter calls, three faults) or long (make
// faults-outside: every fault); unset skips it.
func TestOutsideSuite(t *testing.T) {
	mode := os.Getenv("EDGE_FAULT_SUITE")
	if mode == "" || testing.Short() {
		t.Skip("set EDGE_FAULT_SUITE=short or long (make faults-short, make faults-outside)")
	}
	plan := outsidePlans[mode]
	if plan.rate == 0 {
		t.Fatalf("EDGE_FAULT_SUITE=%q: want short or long", mode)
	}
	r := newOutsideRig(t, plan.fleet, plan.maxCalls, false)
	t.Logf("%s form: %.0f calls/s of %s, %d gold, %d silver and %d bronze pods (max_concurrent %d), 2 replicas, default timings",
		mode, plan.rate, plan.length, plan.fleet.gold, plan.fleet.silver, plan.fleet.bronze, plan.fleet.bronzeMax)
	for _, sc := range outsideScenarios {
		if !plan.runs(sc.name) || sc.sentinel {
			continue
		}
		t.Run(sc.name, func(t *testing.T) { r.scenario(t, plan, sc) })
		r.restore(t, 2)
	}
	for _, sc := range outsideScenarios {
		if plan.runs(sc.name) && sc.sentinel {
			t.Run(sc.name, func(t *testing.T) {
				rs := newOutsideRig(t, plan.fleet, plan.maxCalls, true)
				rs.scenario(t, plan, sc)
			})
		}
	}
}

// outsidePlan is a form of the suite.
type outsidePlan struct {
	rate      float64       // calls started per second
	length    time.Duration // of each call, and of the load before and after the fault
	fleet     outsideFleet
	maxCalls  int
	scenarios []string // nil: every one
}

func (p outsidePlan) runs(name string) bool {
	if p.scenarios == nil {
		return true
	}
	for _, s := range p.scenarios {
		if s == name {
			return true
		}
	}
	return false
}

var outsidePlans = map[string]outsidePlan{
	// The platform team's load: 5 calls/s of 20 s media sockets, about
	// 100 calls live, on 64 pods with 120 call slots.
	"long": {rate: 5, length: 20 * time.Second, fleet: outsideFleet{gold: 40, silver: 14, bronze: 10, bronzeMax: 6}, maxCalls: 3},
	// About 12 calls live: the faults that tell most.
	"short": {rate: 2, length: 6 * time.Second, fleet: outsideFleet{gold: 12, silver: 4, bronze: 3, bronzeMax: 4}, maxCalls: 1,
		scenarios: []string{"Redis restarted empty", "Redis paused 10 s", "a replica killed -9"}},
}

type outsideScenario struct {
	name     string
	sentinel bool // runs on a rig whose Redis is a Sentinel deployment
	outage   bool // every replica goes down on purpose
	inject   func(t *testing.T, r *outsideRig)
}

var outsideScenarios = []outsideScenario{
	{name: "a replica killed -9", inject: func(t *testing.T, r *outsideRig) {
		lead := r.leader(t)
		for _, rp := range r.alive() {
			if rp != lead {
				r.signal(rp, syscall.SIGKILL)
				<-rp.Done()
				return
			}
		}
	}},
	{name: "the leader killed -9", inject: func(t *testing.T, r *outsideRig) {
		lead := r.leader(t)
		killed := time.Now()
		r.signal(lead, syscall.SIGKILL)
		<-lead.Done()
		next := r.leader(t)
		t.Logf("%s leads %s after %s was killed", next.name, time.Since(killed).Round(100*time.Millisecond), lead.name)
	}},
	{name: "a plugin killed", inject: func(t *testing.T, r *outsideRig) {
		rp := r.alive()[0]
		pid := edgetest.ChildPID(t, rp.Pid(), "plugin twilio")
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 60*time.Second, "twilio plugin restarted", func() bool {
			np, ok := edgetest.FindChild(rp.Pid(), "plugin twilio")
			return ok && np != pid
		})
		t.Logf("%s's twilio plugin running again %s after the kill", rp.name, time.Since(killed).Round(10*time.Millisecond))
	}},
	{name: "Redis paused 10 s", inject: func(t *testing.T, r *outsideRig) {
		r.redis.Pause()
		time.Sleep(10 * time.Second) // the fault's own length
		r.redis.Resume()
	}},
	{name: "Redis restarted with its data", inject: func(t *testing.T, r *outsideRig) {
		r.redis.Restart() // kill -9, then a start that loads the AOF
	}},
	{name: "Redis restarted empty", inject: func(t *testing.T, r *outsideRig) {
		r.redis.RestartEmpty()
	}},
	{name: "rolling SIGTERM of every replica", inject: func(t *testing.T, r *outsideRig) {
		// A Deployment's rolling update: a new replica, ready, then the
		// old one terminated (it drains its sockets), one at a time.
		for _, old := range r.alive() {
			rp := r.startReplica()
			r.syncBalancer()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := r.bal.WaitReady(ctx, func(ready []string) bool { return slices.Contains(ready, rp.name) })
			cancel()
			if err != nil {
				t.Fatalf("%s not ready after 2 min", rp.name)
			}
			r.signal(old, syscall.SIGTERM)
		}
	}},
	{name: "edge restarted while its calls live", outage: true, inject: func(t *testing.T, r *outsideRig) {
		// Every replica dies at once (a node lost, a crash loop) and comes
		// back: the calls on them end; their pods must not stay held.
		for _, rp := range r.alive() {
			r.signal(rp, syscall.SIGKILL)
			<-rp.Done()
		}
		r.startReplica()
		r.startReplica()
		r.syncBalancer()
	}},
	{name: "Sentinel primary killed", sentinel: true, inject: func(t *testing.T, r *outsideRig) {
		ctx := context.Background()
		watch := redis.NewSentinelClient(&redis.Options{Addr: r.sentinels.Addrs()[0]})
		defer watch.Close()
		switched := watch.Subscribe(ctx, "+switch-master")
		defer switched.Close()
		if _, err := switched.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		r.primary.Kill()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := switched.ReceiveMessage(wctx); err != nil {
			t.Fatalf("no failover a minute after the primary died: %v", err)
		}
		t.Logf("sentinels promoted the replica %s after the primary died", time.Since(killed).Round(100*time.Millisecond))
	}},
}

// scenario runs the load for one call length, injects the fault, runs the
// load for one more, lets every call end, waits for the pods to be back in
// their pools, and judges.
func (r *outsideRig) scenario(t *testing.T, p outsidePlan, sc outsideScenario) {
	w := outsideWindow{since: time.Now(), outage: sc.outage}
	refused := r.bal.Refused()
	first := len(r.prov.Calls())
	stopSampling := make(chan struct{})
	samples := r.sampleCalls(stopSampling)
	load := r.prov.startLoad(p.rate, p.length, outsideMerchantOf)
	time.Sleep(p.length) // the load's own length: calls in flight when the fault hits
	w.injected = time.Now()
	sc.inject(t, r)
	w.faultEnd = time.Now()
	time.Sleep(p.length)
	load.stop()
	w.lastEnd = time.Now()
	w.refused = r.bal.Refused() - refused
	// Every pod is due back outsidePodsBackWithin after the last call's
	// end, but one answered to a call whose socket never came: its lease
	// waits for the socket (outsideHeldSlack). What the status page says
	// when that runs out tells where the pods are; then wait on, for the
	// figure and a clean next scenario.
	w.due = w.lastEnd.Add(outsidePodsBackWithin)
	for _, c := range r.prov.Calls()[first:] {
		if c.Answer == "stream" && !c.Opened && c.Answered.Add(outsideHeldSlack).After(w.due) {
			w.due = c.Answered.Add(outsideHeldSlack)
		}
	}
	w.freeAfter, w.freed = r.allFree(time.Until(w.due))
	if !w.freed {
		w.stuck = r.poolsText()
		more, freed := r.allFree(150*time.Second - w.freeAfter)
		w.freeAfter, w.freed = w.freeAfter+more, freed
	}
	close(stopSampling)
	w.samples = <-samples
	r.judge(t, w, r.prov.Calls()[first:])
}

// outsideMerchantOf spreads calls over merchants: one in ten is routed to
// silver by its config, one in ten is capped, the rest walk in.
func outsideMerchantOf(i int) string {
	switch i % 10 {
	case 3:
		return outsideRouted
	case 7:
		return outsideCapped
	}
	return outsideWalkIn
}
