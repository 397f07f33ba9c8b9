package main

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// faultTwilioToken signs the fault suite's Twilio webhooks (the rig's
// providers.plugins.twilio.auth_tokens); faultWebhookBase is the public base
// they are signed for (providers.webhook_base_url).
const (
	faultTwilioToken = "fault-suite-twilio-token"
	faultWebhookBase = "https://edge.example.com"
)

var streamURL = regexp.MustCompile(`<Stream url="([^"]+)"`)

// webhookFlood is signed Twilio webhooks sent at a steady rate to one
// replica; each answered call streams one media frame through the replica
// and hangs up, so the pods keep turning over.
type webhookFlood struct {
	stopped atomic.Bool
	wg      sync.WaitGroup
	n       atomic.Int64
	mu      sync.Mutex
	answers []webhookAnswer
}

type webhookAnswer struct {
	at     time.Time // sent
	done   time.Time // answered
	status int
	stream bool   // a <Connect><Stream> answer (the call got a pod)
	code   string // the JSON error code of a refusal
}

// startWebhookFlood posts one webhook every interval from each of workers.
func (s *faultRig) startWebhookFlood(r *mediaReplica, workers int, interval time.Duration) *webhookFlood {
	f := &webhookFlood{}
	for range workers {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for !f.stopped.Load() {
				f.webhook(r)
				<-tick.C
			}
		}()
	}
	return f
}

func (f *webhookFlood) stop() []webhookAnswer {
	f.stopped.Store(true)
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answers
}

func (f *webhookFlood) webhook(r *mediaReplica) {
	path := "/api/v1/twilio/allocate"
	form := url.Values{"CallSid": {fmt.Sprintf("CA%032x", time.Now().UnixNano()+f.n.Add(1))}, "From": {"+15550100"}}
	req, _ := http.NewRequest("POST", r.public+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", edgetest.TwilioSign(faultTwilioToken, faultWebhookBase+path, form))
	ans := webhookAnswer{at: time.Now()}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ans.done = time.Now()
		f.record(ans) // status 0: no answer at all
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	ans.status = resp.StatusCode
	if m := streamURL.FindSubmatch(body); m != nil {
		ans.stream = true
		f.hangUp(r, html.UnescapeString(string(m[1])))
	} else if i := strings.Index(string(body), `"code":"`); i >= 0 {
		ans.code, _, _ = strings.Cut(string(body[i+8:]), `"`)
	}
	ans.done = time.Now()
	f.record(ans)
}

// hangUp runs the call's media for one frame and ends it, which releases
// its pod.
func (f *webhookFlood) hangUp(r *mediaReplica, wsURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, mediaOn(r, wsURL), nil)
	if err != nil {
		return // the lease runs out and the sweep frees the pod
	}
	defer c.CloseNow()
	if c.Write(ctx, websocket.MessageText, []byte(`{"event":"media"}`)) == nil {
		c.Read(ctx)
	}
	c.Close(websocket.StatusNormalClosure, "call ended")
}

func (f *webhookFlood) record(a webhookAnswer) {
	f.mu.Lock()
	f.answers = append(f.answers, a)
	f.mu.Unlock()
}

// killPluginUnderFlood floods replica 0 with signed Twilio webhooks, kills
// its twilio plugin process with SIGKILL, and checks that webhooks are
// answered with the provider's failure (503 provider_unavailable) only
// while the plugin restarts, and with a pod again after the host restarted
// it. It logs the recovery time.
func (s *faultRig) killPluginUnderFlood(t *testing.T) {
	s.mu.Lock()
	r := s.replicas[0]
	s.mu.Unlock()
	pid := edgetest.ChildPID(t, r.Pid(), "plugin twilio")
	flood := s.startWebhookFlood(r, 4, 20*time.Millisecond) // about 200 webhooks/s
	time.Sleep(300 * time.Millisecond)                      // the flood is answered before the kill
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 60*time.Second, "twilio plugin restarted", func() bool {
		np, ok := edgetest.FindChild(r.Pid(), "plugin twilio")
		return ok && np != pid
	})
	time.Sleep(700 * time.Millisecond) // the flood goes on after the restart
	answers := flood.stop()

	var before, refused, after, other int
	var firstRefused, lastRefused, resumed time.Time
	for _, a := range answers {
		switch {
		case a.status == http.StatusOK && a.at.Before(killed):
			before++
		case a.status == http.StatusServiceUnavailable && a.code == "provider_unavailable":
			refused++
			if firstRefused.IsZero() || a.at.Before(firstRefused) {
				firstRefused = a.at
			}
			if a.at.After(lastRefused) {
				lastRefused = a.at
			}
		case a.status == http.StatusOK:
			after++
		default:
			other++
			t.Errorf("webhook sent %s after the kill answered %d %q", a.at.Sub(killed).Round(time.Millisecond), a.status, a.code)
		}
	}
	for _, a := range answers {
		if a.stream && a.at.After(lastRefused) && (resumed.IsZero() || a.at.Before(resumed)) {
			resumed = a.at
		}
	}
	t.Logf("webhooks: %d answered before the kill, %d answered 503 provider_unavailable, %d answered after, %d other", before, refused, after, other)
	if before == 0 {
		t.Error("no webhook was answered before the kill")
	}
	// A webhook in flight when the plugin died is refused too: only one
	// answered before the kill would be wrong.
	for _, a := range answers {
		if a.status == http.StatusServiceUnavailable && a.done.Before(killed) {
			t.Errorf("a webhook was refused %s before the kill", killed.Sub(a.done))
		}
	}
	if resumed.IsZero() {
		t.Fatal("no webhook got a pod after the plugin was restarted")
	}
	// Every answer after the first one with a pod again is a success: the
	// 503s are confined to the restart.
	for _, a := range answers {
		if a.at.After(resumed) && a.status != http.StatusOK {
			t.Errorf("webhook sent %s after service resumed answered %d %q", a.at.Sub(resumed).Round(time.Millisecond), a.status, a.code)
		}
	}
	t.Logf("plugin killed -> webhooks answered with a pod again: %s (503s for %s)", resumed.Sub(killed).Round(time.Millisecond), lastRefused.Sub(killed).Round(time.Millisecond))
}
