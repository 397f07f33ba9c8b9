package outside

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/balancer"
	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testredis"
)

// outsideFleet is the pods of an outside rig: exclusive gold and silver
// pods, shared bronze pods. gold then bronze is the default chain; silver
// serves only the merchant whose config routes it there.
type outsideFleet struct {
	gold, silver, bronze int
	bronzeMax            int // bronze's max_concurrent
}

// The Twilio account the rig's provider signs as, and the webhook base
// edge is told it is reached at.
const (
	outsideTwilioToken = "outside-suite-twilio-token"
	outsideWebhookBase = "https://edge.example.com"
)

const (
	// outsideRouted is a merchant whose config routes its calls to silver
	// (fallback chain [silver]); outsideCapped one with max_calls.
	outsideRouted = "routed"
	outsideCapped = "capped"
	// outsideWalkIn has no config: the default chain.
	outsideWalkIn = "walkin"
)

// outsideRig is edge as a deployment runs it: replicas behind a
// readiness-honouring balancer, a real Redis (one server with AOF, or
// Sentinel), the built-in providers as plugin processes and recording
// agents as pods. Timings are edge's defaults but http.shutdown_delay,
// set as deploy/ sets it, scaled to the balancer's 200 ms probes.
type outsideRig struct {
	t     *testing.T
	bin   string
	cfg   string
	fleet outsideFleet
	// Redis: redis alone, or primary, replica and sentinels.
	redis     *testredis.Server
	primary   *testredis.Server
	sentinels *testredis.Sentinels

	rec    *fakeagent.Recorder
	agents map[string]*fakeagent.Agent
	tierOf map[string]string
	bal    *balancer.Balancer
	prov   *outsideProvider

	maxCalls int // the capped merchant's max_calls

	mu       sync.Mutex
	replicas []*outsideReplica
	serial   int
	// sigkilled names the replicas killed -9 during the current scenario:
	// calls whose socket went through one may be cut.
	sigkilled map[string]bool
}

// outsideReplica is one edge process.
type outsideReplica struct {
	*edgetest.Process
	name          string
	public, admin string
}

func newOutsideRig(t *testing.T, fleet outsideFleet, maxCalls int, sentinel bool) *outsideRig {
	t.Helper()
	r := &outsideRig{t: t, bin: edgetest.Binary(t), fleet: fleet, maxCalls: maxCalls,
		rec: fakeagent.NewRecorder(), agents: map[string]*fakeagent.Agent{}, tierOf: map[string]string{}, sigkilled: map[string]bool{}}
	var redisYAML string
	if sentinel {
		r.primary = testredis.Start(t, testredis.TCP())
		testredis.StartReplica(t, r.primary)
		r.sentinels = testredis.StartSentinels(t, "edge", r.primary, 3, 1)
		redisYAML = fmt.Sprintf("redis: {sentinel: {master: edge, addrs: [%s]}}", strings.Join(r.sentinels.Addrs(), ", "))
	} else {
		r.redis = testredis.Start(t, testredis.TCP(), testredis.AOF())
		redisYAML = fmt.Sprintf("redis: {url: %q}", r.redis.URL())
	}
	var err error
	if r.bal, err = balancer.Listen("127.0.0.1:0", balancer.Options{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	balDone := make(chan struct{})
	go func() {
		defer close(balDone)
		r.bal.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-balDone
	})

	var pods strings.Builder
	for _, tier := range []struct {
		name string
		n    int
	}{{"gold", fleet.gold}, {"silver", fleet.silver}, {"bronze", fleet.bronze}} {
		for i := range tier.n {
			name := fmt.Sprintf("%s-%02d", tier.name, i)
			ag := outsideAgent(t, r.rec, name)
			r.agents[name], r.tierOf[name] = ag, tier.name
			fmt.Fprintf(&pods, "    - {name: %s, address: %q, tier: %s}\n", name, ag.Addr(), tier.name)
		}
	}
	r.cfg = edgetest.WriteFile(t, "edge-outside.yaml", fmt.Sprintf(`
listen: {public: "127.0.0.1:0", admin: "127.0.0.1:0", internal: "127.0.0.1:0"}
log: {format: json, level: info}
%s
public_base_url: "ws://%s"
http: {shutdown_delay: 2s}
tiers:
  gold: {type: exclusive, target: %d}
  silver: {type: exclusive, target: %d}
  bronze: {type: shared, target: %d, max_concurrent: %d}
default_chain: [gold, bronze]
pods:
  static:
%s
proxy: {token_secret: %q}
providers: {webhook_base_url: %q, plugins: {twilio: {auth_tokens: %q}}}
`+edgetest.APITokenYAML, redisYAML, r.bal.Addr(), fleet.gold, fleet.silver, fleet.bronze, fleet.bronzeMax, pods.String(),
		strings.Repeat("s", 32), outsideWebhookBase, outsideTwilioToken))
	for range 2 {
		r.startReplica()
	}
	r.syncBalancer()
	r.waitReady(t, 2)
	r.prov = newOutsideProvider(r.bal, outsideTwilioToken, 200*time.Millisecond)

	// Merchant policy, written once through the admin API as an operator
	// would: it lives in Redis only.
	admin := r.alive()[0].admin
	for id, body := range map[string]string{
		outsideRouted: `{"fallback":["silver"]}`,
		outsideCapped: fmt.Sprintf(`{"max_calls":%d}`, maxCalls),
	} {
		req, _ := http.NewRequest(http.MethodPut, admin+"/api/v1/config/merchants/"+id, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("merchant %s: %d %s", id, resp.StatusCode, b)
		}
	}
	if d, ok := r.allFree(5 * time.Minute); !ok {
		t.Fatalf("pods not all free %s after the start: %s", d, r.poolsText())
	}
	return r
}

// outsideAgent is a recording agent that serves until the test's end.
func outsideAgent(t *testing.T, rec *fakeagent.Recorder, pod string) *fakeagent.Agent {
	t.Helper()
	return edgetest.Agent(t, rec, pod)
}

// startReplica starts one more edge process and waits until it listens.
// It belongs to the whole test, not to a scenario. Each replica has a name
// of its own (leader.identity), as each Kubernetes pod has its host name.
func (r *outsideRig) startReplica() *outsideReplica {
	t := r.t
	r.mu.Lock()
	name := fmt.Sprintf("edge-%d", r.serial)
	r.serial++
	r.mu.Unlock()
	p := edgetest.Run(t, edgetest.Options{Binary: r.bin, Args: []string{"--config", r.cfg},
		Env: []string{"EDGE_LEADER__IDENTITY=" + name}, InheritEnv: true, Name: name, FailureLines: 30})
	rp := &outsideReplica{Process: p, name: name, public: p.PublicURL, admin: p.AdminURL}
	r.mu.Lock()
	r.replicas = append(r.replicas, rp)
	r.mu.Unlock()
	return rp
}

// alive is the replicas whose process runs.
func (r *outsideRig) alive() []*outsideReplica {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*outsideReplica
	for _, rp := range r.replicas {
		select {
		case <-rp.Done():
		default:
			out = append(out, rp)
		}
	}
	return out
}

// syncBalancer puts every running replica behind the balancer, as
// Kubernetes lists a Service's endpoints; an exited one leaves it.
func (r *outsideRig) syncBalancer() {
	var bs []balancer.Backend
	for _, rp := range r.alive() {
		bs = append(bs, balancer.Backend{Name: rp.name, Addr: strings.TrimPrefix(rp.public, "http://"), ReadyURL: rp.admin + "/readyz"})
	}
	r.bal.SetBackends(bs...)
}

// waitReady waits until n backends are ready.
func (r *outsideRig) waitReady(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := r.bal.WaitReady(ctx, func(ready []string) bool { return len(ready) >= n }); err != nil {
		t.Fatalf("%d of %d replicas ready after 2 min: %v", len(r.bal.Ready()), n, r.bal.Ready())
	}
}

// signal sends sig to rp; with SIGKILL its calls may be cut.
func (r *outsideRig) signal(rp *outsideReplica, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		r.mu.Lock()
		r.sigkilled[rp.name] = true
		r.mu.Unlock()
	}
	rp.Signal(sig)
}

// leader is the replica that leads now, asked of each replica's admin API.
func (r *outsideRig) leader(t *testing.T) *outsideReplica {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, rp := range r.alive() {
			var st struct {
				IsLeader bool `json:"is_leader"`
			}
			if edgetest.GetJSON(rp.admin+"/api/v1/status", &st) == nil && st.IsLeader {
				return rp
			}
		}
		time.Sleep(100 * time.Millisecond) // leadership is announced nowhere to subscribe
	}
	t.Fatal("no replica leads")
	return nil
}

// outsidePools is /api/v1/status's tiers.
type outsidePools map[string]struct {
	Available int `json:"available"`
	Assigned  int `json:"assigned"`
	Calls     int `json:"calls_in_progress"`
}

func (r *outsideRig) pools() (outsidePools, error) {
	for _, rp := range r.alive() {
		var st struct {
			Tiers outsidePools `json:"tiers"`
		}
		if err := edgetest.GetJSON(rp.admin+"/api/v1/status", &st); err == nil && st.Tiers != nil {
			return st.Tiers, nil
		}
	}
	return nil, fmt.Errorf("no replica answers its status")
}

func (r *outsideRig) poolsText() string {
	p, err := r.pools()
	if err != nil {
		return err.Error()
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// free says every pod is back in its pool and no call is left, as the
// operator's status page shows it.
func (r *outsideRig) free() bool {
	p, err := r.pools()
	if err != nil {
		return false
	}
	want := map[string]int{"gold": r.fleet.gold, "silver": r.fleet.silver, "bronze": r.fleet.bronze}
	for tier, n := range want {
		if n > 0 && (p[tier].Available != n || p[tier].Calls != 0) {
			return false
		}
	}
	return true
}

// allFree waits up to within for free and says how long it took.
func (r *outsideRig) allFree(within time.Duration) (time.Duration, bool) {
	start := time.Now()
	for !r.free() {
		if time.Since(start) > within {
			return time.Since(start), false
		}
		time.Sleep(200 * time.Millisecond) // Redis state announces nothing
	}
	return time.Since(start), true
}

// limit is how many sockets a pod may serve at once.
func (r *outsideRig) limit(pod string) int {
	if r.tierOf[pod] == "bronze" {
		return r.fleet.bronzeMax
	}
	return 1
}

// restore replaces every replica that exited with a fresh one, so that
// the next scenario starts with as many as the first.
func (r *outsideRig) restore(t *testing.T, want int) {
	for n := len(r.alive()); n < want; n++ {
		r.startReplica()
	}
	r.syncBalancer()
	r.waitReady(t, want)
	r.mu.Lock()
	clear(r.sigkilled)
	r.mu.Unlock()
}
