package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/testwait"
)

// A blip of the shared Redis shorter than http.readiness_redis_grace does
// not take the replica out of the balancer: every replica would go at once,
// leaving the balancer no backend for the webhooks and media sockets of
// calls edge had just answered. Both a hung Redis (paused) and a restarted
// one (refused connections) are ridden out, and the admin detail says the
// check is failing within its grace. A Redis lost for longer than the grace
// does turn the replica unready, and it is ready again once Redis is back.
func TestReadinessRidesOutARedisBlip(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an edge process")
	}
	const grace = 3 * time.Second
	f := newE2E(t)
	rs := f.redis
	e := f.start("edge", f.config("edge.yaml", fmt.Sprintf("http: {readiness_redis_grace: %s}\n", grace)), "EDGE_LISTEN__INTERNAL=")

	p := startReadyzPoller(t, map[string]string{"admin": e.admin + "/readyz", "public": e.public + "/readyz"}, 100*time.Millisecond)
	p.await(t, 30*time.Second, "both listeners ready", time.Time{}, func(a []readyzAnswer) bool {
		return healthy(a, "admin") && healthy(a, "public")
	})

	// A hung Redis, for half the grace.
	from := time.Now()
	rs.Pause()
	time.Sleep(grace / 2) // the fault's own length
	rs.Resume()
	p.await(t, 10*time.Second, "redis answering again after the pause", time.Now(), func(a []readyzAnswer) bool {
		return healthy(a, "admin") && healthy(a, "public")
	})
	p.expectReady(t, "Redis paused for half the grace", from, true)

	// A restarted Redis (connections refused, then an empty server): a
	// restart or a Sentinel failover shorter than the grace.
	from = time.Now()
	rs.Stop()
	time.Sleep(grace / 2) // the fault's own length
	rs.Restart()
	p.await(t, 10*time.Second, "redis answering again after the restart", time.Now(), func(a []readyzAnswer) bool {
		return healthy(a, "admin") && healthy(a, "public")
	})
	p.expectReady(t, "Redis stopped and restarted within the grace", from, true)

	// Redis lost for longer than the grace: unready, with the check named,
	// never before the grace has passed.
	from = time.Now()
	rs.Pause()
	p.await(t, grace+5*time.Second, "both listeners unready", from, func(a []readyzAnswer) bool {
		return unready(a, "admin") && unready(a, "public")
	})
	unreadyAfter := time.Since(from)
	for _, a := range p.since(from) {
		if a.status != http.StatusOK && a.at.Sub(from) < grace-100*time.Millisecond {
			t.Errorf("%s /readyz answered %d %s after %v of a Redis outage, within the grace (%v)", a.listener, a.status, a.body, a.at.Sub(from).Round(time.Millisecond), grace)
		}
		if a.listener == "admin" && a.status != http.StatusOK && !strings.Contains(a.body, `"redis"`) {
			t.Errorf("admin /readyz unready without naming redis: %s", a.body)
		}
	}
	t.Logf("unready %v after Redis was paused (grace %v)", unreadyAfter.Round(time.Millisecond), grace)
	// Redis is still paused: the verdict stays unready while we scrape.
	metrics := provBody(t, e.admin+"/metrics")
	if !strings.Contains(metrics, "\nedge_ready 0\n") || !strings.Contains(metrics, `edge_readiness_shared_down_seconds{check="redis"} `) {
		t.Errorf("metrics while unready lack edge_ready 0 or edge_readiness_shared_down_seconds{check=\"redis\"}")
	}

	// edge's log lines leave in batches (logwriter.go): awaited.
	testwait.Until(t, 5*time.Second, "a log line saying the grace ran out", func() bool {
		return strings.Contains(e.Log(), "failing for longer than its grace: this replica is not ready")
	})

	from = time.Now()
	rs.Resume()
	p.await(t, 10*time.Second, "both listeners ready once Redis is back", from, func(a []readyzAnswer) bool {
		return healthy(a, "admin") && healthy(a, "public")
	})
	t.Logf("ready again %v after Redis was resumed", time.Since(from).Round(time.Millisecond))
	p.stop()
	p.dump(t)
}

// readyzAnswer is one answer of a /readyz poll.
type readyzAnswer struct {
	listener string
	at       time.Time     // when the answer arrived
	took     time.Duration // since the request was sent
	status   int           // 0: no answer (err)
	body     string
}

// readyzPoller polls each listener's /readyz on its own goroutine and keeps
// every answer.
type readyzPoller struct {
	mu      sync.Mutex
	answers []readyzAnswer
	changed chan struct{} // closed and replaced at every answer
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startReadyzPoller(t *testing.T, urls map[string]string, every time.Duration) *readyzPoller {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &readyzPoller{changed: make(chan struct{}), cancel: cancel}
	client := &http.Client{Timeout: 5 * time.Second}
	for name, url := range urls {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				a, sent := readyzAnswer{listener: name}, time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := client.Do(req)
				if err == nil {
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					a.status, a.body = resp.StatusCode, strings.TrimSpace(string(raw))
				} else {
					a.body = err.Error()
				}
				if ctx.Err() != nil {
					return
				}
				a.at = time.Now()
				a.took = a.at.Sub(sent)
				p.mu.Lock()
				p.answers = append(p.answers, a)
				close(p.changed)
				p.changed = make(chan struct{})
				p.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
	t.Cleanup(p.stop)
	return p
}

func (p *readyzPoller) stop() {
	p.cancel()
	p.wg.Wait()
}

// await waits for the answers that arrived after t0 to satisfy cond
// (checked at each new answer).
func (p *readyzPoller) await(t *testing.T, within time.Duration, what string, t0 time.Time, cond func([]readyzAnswer) bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if cond(p.since(t0)) {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			p.dump(t)
			t.Fatalf("not within %v: %s", within, what)
		}
	}
}

// since returns the answers that arrived after t0.
func (p *readyzPoller) since(t0 time.Time) []readyzAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []readyzAnswer
	for _, a := range p.answers {
		if a.at.After(t0) {
			out = append(out, a)
		}
	}
	return out
}

// expectReady checks every answer since t0 was 200, and that the admin
// detail said Redis was failing within its grace at least once (when
// wantDegraded).
func (p *readyzPoller) expectReady(t *testing.T, fault string, t0 time.Time, wantDegraded bool) {
	t.Helper()
	answers, degraded := p.since(t0), 0
	for _, a := range answers {
		if a.status != http.StatusOK {
			t.Errorf("%s: %s /readyz answered %d %s after %v", fault, a.listener, a.status, a.body, a.at.Sub(t0).Round(time.Millisecond))
		}
		// A probe that times out counts as failed: kubelet's default
		// timeoutSeconds is 1.
		if a.took >= time.Second {
			t.Errorf("%s: %s /readyz took %v to answer", fault, a.listener, a.took.Round(time.Millisecond))
		}
		if a.listener == "admin" && strings.Contains(a.body, `"degraded"`) && strings.Contains(a.body, "grace") {
			degraded++
		}
	}
	if wantDegraded && degraded == 0 {
		t.Errorf("%s: no admin /readyz answer said Redis was failing within its grace", fault)
	}
	t.Logf("%s: %d answers, all 200; %d admin answers named the Redis check degraded", fault, len(answers), degraded)
}

func (p *readyzPoller) dump(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, a := range p.answers {
		fmt.Fprintf(&b, "%s %s %d in %v %s\n", a.at.Format("15:04:05.000"), a.listener, a.status, a.took.Round(time.Millisecond), a.body)
	}
	t.Logf("every /readyz answer:\n%s", b.String())
}

// healthy reports that the last answer of listener was 200 with no check
// failing within its grace: Redis answers again.
func healthy(answers []readyzAnswer, listener string) bool {
	for i := len(answers) - 1; i >= 0; i-- {
		if a := answers[i]; a.listener == listener {
			return a.status == http.StatusOK && !strings.Contains(a.body, "degraded")
		}
	}
	return false
}

// unready reports that the last answer of listener was 503.
func unready(answers []readyzAnswer, listener string) bool {
	for i := len(answers) - 1; i >= 0; i-- {
		if a := answers[i]; a.listener == listener {
			return a.status == http.StatusServiceUnavailable
		}
	}
	return false
}
