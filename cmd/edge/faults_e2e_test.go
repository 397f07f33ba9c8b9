package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testredis"
)

// The fault suite (docs/reliability.md): 3 edge replicas, one real Redis and
// 12 WebSocket pods; calls allocate on one replica and stream media through
// another; faults are injected one at a time under that load, and after each
// the suite checks the invariants over every key and reports how long the
// system took to recover. EDGE_FAULT_SUITE=short (CI: calls of 1-2 s) or
// long (calls of 2-20 s); unset skips it.
func TestFaultSuite(t *testing.T) {
	mode := os.Getenv("EDGE_FAULT_SUITE")
	if mode == "" || testing.Short() {
		t.Skip("set EDGE_FAULT_SUITE=short or long (make faults-short, make faults)")
	}
	minCall, maxCall, loadFor := time.Second, 2*time.Second, 3*time.Second
	if mode == "long" {
		minCall, maxCall, loadFor = 2*time.Second, 20*time.Second, 20*time.Second
	}
	s := newFaultRig(t)

	s.fault(t, "kill -9 of the replica holding sockets", minCall, maxCall, loadFor, func(t *testing.T) {
		s.killReplica(t, 2, syscall.SIGKILL)
	})
	s.fault(t, "kill -9 of the leader", minCall, maxCall, loadFor, func(t *testing.T) {
		old := s.leader(t)
		killed := time.Now()
		s.killReplica(t, old, syscall.SIGKILL)
		s.leader(t)
		t.Logf("new leader %s after the kill (leader.lease_duration 2s)", time.Since(killed).Round(100*time.Millisecond))
	})
	s.fault(t, "SIGTERM of a replica with live calls", minCall, maxCall, loadFor, func(t *testing.T) {
		s.killReplica(t, 2, syscall.SIGTERM)
	})
	s.fault(t, "Redis paused 3 s", minCall, maxCall, loadFor, func(t *testing.T) {
		s.redis.Pause()
		time.Sleep(3 * time.Second) // the fault's own length
		s.redis.Resume()
	})
	s.fault(t, "Redis restarted empty", minCall, maxCall, loadFor, func(t *testing.T) {
		s.redis.Restart()
	})
	s.fault(t, "kill -9 of a plugin under a webhook flood", minCall, maxCall, loadFor, func(t *testing.T) {
		s.killPluginUnderFlood(t)
	})
	s.fault(t, "a pod killed mid-call", minCall, maxCall, loadFor, func(t *testing.T) {
		// A pod serving a call right now.
		victim := 0
		for _, key := range s.rdb.Keys(context.Background(), "voice:lease:pod-*").Val() {
			fmt.Sscanf(strings.TrimPrefix(key, "voice:lease:"), "pod-%d", &victim)
			break
		}
		t.Logf("killing pod-%02d", victim)
		s.agents[victim].Kill()
		s.mu.Lock()
		s.dead++
		s.mu.Unlock()
	})
}

// faultRig is the system under test.
type faultRig struct {
	bin, cfg string
	redis    *testredis.Server
	rdb      *redis.Client
	agents   []*fakeagent.Agent
	mu       sync.Mutex
	replicas []*mediaReplica
	pods     int
	dead     int // pods killed
}

func newFaultRig(t *testing.T) *faultRig {
	s := &faultRig{bin: edgetest.Binary(t), redis: testredis.Start(t, testredis.TCP()), pods: 12}
	s.rdb = s.redis.Client()
	var pods strings.Builder
	for i := range s.pods {
		ag := mediaAgent(t)
		s.agents = append(s.agents, ag)
		fmt.Fprintf(&pods, "    - {name: pod-%02d, address: %q, tier: gold}\n", i, ag.Addr())
	}
	s.cfg = edgetest.WriteFile(t, "edge.yaml", fmt.Sprintf(`
listen: {public: "127.0.0.1:0", admin: "127.0.0.1:0", internal: "127.0.0.1:0"}
log: {format: json, level: info}
redis: {url: %q}
allocator: {lease_ttl: 2s, renew_interval: 500ms, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: %d}}
default_chain: [gold]
pods:
  static:
%s
proxy: {token_secret: %q, idle_timeout: 5s, drain_timeout: 3s}
pool: {zombie_sweep_interval: 500ms, reconcile_interval: 2s, tier_config_refresh: 1s}
leader: {lease_duration: 2s, renew_deadline: 1500ms, retry_period: 300ms}
providers: {webhook_base_url: %q, plugins: {twilio: {auth_tokens: %q}}}
`+edgetest.APITokenYAML, s.redis.URL(), s.pods, pods.String(), strings.Repeat("s", 32), faultWebhookBase, faultTwilioToken))
	for i := range 3 {
		s.replicas = append(s.replicas, mediaStartReplica(t, s.bin, fmt.Sprintf("edge-%d", i), s.cfg))
	}
	s.recovered(t, "start")
	return s
}

// fault runs call load for loadFor, injects the fault in its middle, then
// waits for recovery and checks the invariants.
func (s *faultRig) fault(t *testing.T, name string, minCall, maxCall, loadFor time.Duration, inject func(t *testing.T)) {
	t.Run(name, func(t *testing.T) {
		load := s.startLoad(minCall, maxCall)
		time.Sleep(loadFor / 2) // calls in flight when the fault hits
		injected := time.Now()
		inject(t)
		time.Sleep(loadFor / 2)
		res := load.stop()
		t.Logf("calls: %d answered, %d completed, %d refused (503), %d cut mid-call, %d media refused", res.allocated, res.completed, res.refused, res.cut, res.mediaRefused)
		if last := load.lastRefused.Load(); last > injected.UnixNano() {
			t.Logf("allocations refused until %s after the fault", time.Duration(last-injected.UnixNano()).Round(100*time.Millisecond))
		}
		if v := s.violations(); len(v) > 0 {
			t.Errorf("invariants broken right after %s: %v", name, v)
		}
		took := s.recovered(t, name)
		t.Logf("recovered %s after the fault was injected (%s after the load stopped)", time.Since(injected).Round(100*time.Millisecond), took.Round(100*time.Millisecond))
	})
	// The replacements belong to the whole suite: started under the
	// subtest, its cleanup would kill them as it ends.
	s.restore(t)
}

// killReplica signals replica i and replaces it with a fresh one after the
// fault (restore).
func (s *faultRig) killReplica(t *testing.T, i int, sig syscall.Signal) {
	s.mu.Lock()
	r := s.replicas[i]
	s.mu.Unlock()
	r.Signal(sig)
	select {
	case <-r.Done():
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not exit 30 s after %s", r.name, sig)
	}
}

// restore brings every killed replica and pod back.
func (s *faultRig) restore(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.replicas {
		select {
		case <-r.Done():
			s.replicas[i] = mediaStartReplica(t, s.bin, r.name, s.cfg)
		default:
		}
	}
}

// leader is the index of the replica that leads now.
func (s *faultRig) leader(t *testing.T) int {
	for range 100 {
		for i, r := range s.alive() {
			var st struct {
				IsLeader bool `json:"is_leader"`
			}
			if edgetest.GetJSON(r.admin+"/api/v1/status", &st) == nil && st.IsLeader {
				return i
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no replica leads")
	return 0
}

func (s *faultRig) alive() []*mediaReplica {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*mediaReplica
	for _, r := range s.replicas {
		select {
		case <-r.Done():
		default:
			out = append(out, r)
		}
	}
	return out
}

// recovered waits (no load) until every live pod is registered and free,
// no call is left and the invariants hold; it returns how long that took.
func (s *faultRig) recovered(t *testing.T, after string) time.Duration {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	s.mu.Lock()
	want := int64(s.pods - s.dead)
	s.mu.Unlock()
	for {
		calls := len(s.rdb.Keys(ctx, "voice:call:*").Val())
		free := s.rdb.SCard(ctx, "voice:pool:gold:available").Val()
		if calls == 0 && free >= want && len(s.violations()) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("not recovered 60 s after %s: %d calls left, %d of %d pods free, violations %v", after, calls, free, want, s.violations())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// faultCheck runs inside Redis, so it sees one instant: no pod serves two
// calls, and no pod serving a call is available to another.
const faultCheck = `
local perPod, bad = {}, {}
for _, ck in ipairs(redis.call('KEYS', 'voice:call:*')) do
  local pod = redis.call('HGET', ck, 'pod_name')
  if pod then
    if perPod[pod] then bad[#bad+1] = pod .. ' serves ' .. perPod[pod] .. ' and ' .. ck end
    perPod[pod] = ck
    if redis.call('SISMEMBER', 'voice:pool:gold:available', pod) == 1 then bad[#bad+1] = pod .. ' is available while serving ' .. ck end
  end
end
return bad
`

func (s *faultRig) violations() []string {
	v, err := s.rdb.Eval(context.Background(), faultCheck, nil).StringSlice()
	if err != nil {
		return nil // Redis unreachable: nothing to check yet
	}
	return v
}

// faultLoad is calls running until stop.
type faultLoad struct {
	stopped                                              atomic.Bool
	wg                                                   sync.WaitGroup
	allocated, completed, refused, cut, mediaRefused, id atomic.Int64
	lastRefused                                          atomic.Int64 // unix ns
}

type loadResult struct{ allocated, completed, refused, cut, mediaRefused int64 }

func (s *faultRig) startLoad(minCall, maxCall time.Duration) *faultLoad {
	l := &faultLoad{}
	for range 8 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for !l.stopped.Load() {
				s.call(l, minCall+time.Duration(rand.Int64N(int64(maxCall-minCall)+1)))
			}
		}()
	}
	return l
}

func (l *faultLoad) stop() loadResult {
	l.stopped.Store(true)
	l.wg.Wait()
	return loadResult{l.allocated.Load(), l.completed.Load(), l.refused.Load(), l.cut.Load(), l.mediaRefused.Load()}
}

// call allocates on one live replica, streams media through another for d,
// then closes the socket (edge releases the call).
func (s *faultRig) call(l *faultLoad, d time.Duration) {
	alive := s.alive()
	if len(alive) == 0 {
		time.Sleep(100 * time.Millisecond)
		return
	}
	a, b := alive[rand.IntN(len(alive))], alive[rand.IntN(len(alive))]
	callID := fmt.Sprintf("CF-%d-%d", time.Now().UnixNano(), l.id.Add(1))
	resp, err := edgetest.PostAuthorized(a.public+"/api/v1/allocate", fmt.Sprintf(`{"call_sid":%q}`, callID))
	if err != nil {
		l.lastRefused.Store(time.Now().UnixNano()) // the replica died under the request
		return
	}
	var ans struct {
		WSURL string `json:"ws_url"`
	}
	edgetest.DecodeJSON(resp, &ans)
	if resp.StatusCode != http.StatusOK {
		l.refused.Add(1)
		l.lastRefused.Store(time.Now().UnixNano())
		time.Sleep(100 * time.Millisecond)
		return
	}
	l.allocated.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, mediaOn(b, ans.WSURL), nil)
	if err != nil {
		l.mediaRefused.Add(1)
		return
	}
	defer c.CloseNow()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"event":"media"}`)); err != nil {
			l.cut.Add(1)
			return
		}
		if _, _, err := c.Read(ctx); err != nil {
			l.cut.Add(1)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Close(websocket.StatusNormalClosure, "call ended")
	l.completed.Add(1)
}
