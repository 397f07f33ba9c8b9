package outside

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
)

// Redis restarted empty under live calls must not hand a busy exclusive
// pod to a second call: the design promises that a busy exclusive pod is
// never offered to a second call. One replica with edge's default timings,
// 4 exclusive pods, each serving a live call whose socket streams; Redis is
// killed and started empty; 4 new calls then try for 10 s to get a pod.
// They may be refused, or wait, or land on a pod whose call has ended: the
// agents' own recordings must show no pod serving two calls at once.
func TestRedisRestartedEmptyNeverDoubleServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an edge process")
	}
	rs := testredis.Start(t, testredis.TCP())
	rec := fakeagent.NewRecorder()
	var pods strings.Builder
	for i := range 4 {
		name := fmt.Sprintf("pod-%d", i)
		ag := outsideAgent(t, rec, name)
		fmt.Fprintf(&pods, "    - {name: %s, address: %q, tier: gold}\n", name, ag.Addr())
	}
	cfg := edgetest.WriteFile(t, "edge.yaml", fmt.Sprintf(`
listen: {public: "127.0.0.1:0", admin: "127.0.0.1:0", internal: "127.0.0.1:0"}
log: {format: json, level: info}
redis: {url: %q}
tiers: {gold: {type: exclusive, target: 4}}
default_chain: [gold]
pods:
  static:
%s
proxy: {token_secret: %q}
`+edgetest.APITokenYAML, rs.URL(), pods.String(), strings.Repeat("s", 32)))
	e := edgetest.Run(t, edgetest.Options{Args: []string{"--config", cfg}, InheritEnv: true})
	testwait.Until(t, 30*time.Second, "4 pods available", func() bool {
		for i := range 4 {
			if edgetest.Pod(t, e.AdminURL, fmt.Sprintf("pod-%d", i)).Status != "available" {
				return false
			}
		}
		return true
	})
	began := time.Now()
	p := &outsideProvider{frameEvery: 100 * time.Millisecond}

	// 4 live calls, one per pod, streaming until the end of the test.
	var old []*outsideCall
	hangUpOld, stopOld := context.WithCancel(context.Background())
	defer stopOld()
	var wgOld sync.WaitGroup
	for i := range 4 {
		c := &outsideCall{ID: fmt.Sprintf("CA-old-%d", i), CloseCode: -1}
		if !outsideAllocate(e, c) {
			t.Fatalf("allocate %s before the restart: %d %s", c.ID, c.Status, c.Err)
		}
		old = append(old, c)
		wgOld.Add(1)
		go func() {
			defer wgOld.Done()
			p.stream(hangUpOld, c, time.Hour)
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rec.Wait(ctx, func() bool { return rec.Started() == 4 }); err != nil {
		t.Fatalf("%d of 4 calls streaming", rec.Started())
	}

	rs.Restart()
	restarted := time.Now()

	// 4 new calls, each retrying for 10 s as a provider retries, and
	// streaming for 3 s once it has a pod.
	var neu []*outsideCall
	var wgNew sync.WaitGroup
	for i := range 4 {
		c := &outsideCall{ID: fmt.Sprintf("CA-new-%d", i), CloseCode: -1}
		neu = append(neu, c)
		wgNew.Add(1)
		go func() {
			defer wgNew.Done()
			for time.Since(restarted) < 10*time.Second {
				if outsideAllocate(e, c) {
					p.stream(context.Background(), c, 3*time.Second)
					return
				}
				time.Sleep(200 * time.Millisecond) // the provider's retry cadence
			}
		}()
	}
	wgNew.Wait()
	stopOld()
	wgOld.Wait()

	answered, cut := 0, 0
	for _, c := range neu {
		if c.Answer == "stream" {
			answered++
			t.Logf("new call %s answered %s after the restart with %s", c.ID, c.Answered.Sub(restarted).Round(10*time.Millisecond), c.Pod)
		} else {
			t.Logf("new call %s not answered with a pod: last answer %d %s", c.ID, c.Status, outsideShort(c.Body+c.Err))
		}
	}
	for _, c := range old {
		if c.Cut {
			cut++
			t.Logf("old call %s on %s cut %s after the restart (close %d)", c.ID, c.Pod, c.Ended.Sub(restarted).Round(10*time.Millisecond), c.CloseCode)
		}
	}
	overlaps := rec.Overlaps(began, func(string) int { return 1 })
	var longest time.Duration
	for _, o := range overlaps {
		longest = max(longest, o.Duration())
		t.Logf("%s served %v at once for %s from %s after the restart", o.Pod, o.Calls, o.Duration().Round(10*time.Millisecond), o.From.Sub(restarted).Round(10*time.Millisecond))
	}
	t.Logf("new calls answered with a pod: %d of 4; old calls cut: %d of 4; pods serving two calls at once: %d (longest %s)",
		answered, cut, len(overlaps), longest.Round(10*time.Millisecond))
	if len(overlaps) > 0 {
		t.Errorf("after Redis restarted empty, %d exclusive pods served two calls at once (the longest for %s)", len(overlaps), longest.Round(10*time.Millisecond))
	}
}

// outsideAllocate allocates c on r through the generic API; true when it
// got a pod (c.Body is then its media URL on r).
func outsideAllocate(r *edgetest.Process, c *outsideCall) bool {
	c.Sent = time.Now()
	resp, err := edgetest.PostAuthorized(r.PublicURL+"/api/v1/allocate", fmt.Sprintf(`{"call_sid":%q}`, c.ID))
	c.Answered = time.Now()
	if err != nil {
		c.Status, c.Err = 0, err.Error()
		return false
	}
	var ans struct {
		PodName string `json:"pod_name"`
		WSURL   string `json:"ws_url"`
		Code    string `json:"code"`
	}
	edgetest.DecodeJSON(resp, &ans)
	c.Status, c.Body = resp.StatusCode, ans.Code
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c.Answer, c.Pod, c.Body = "stream", ans.PodName, edgetest.MediaOn(r.PublicURL, ans.WSURL)
	return true
}
