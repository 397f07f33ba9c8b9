package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testwait"
)

// TestResumePodLostMidCallEndToEnd runs, for each built-in provider, the
// real edge binary with its provider plugin process, a real redis-server
// and two test pods, with proxy.resume on for every tier. The provider's
// signed webhook is answered, its media socket opens on the URL of the
// answer and carries the stream's real opening and media, each echoed;
// then the pod serving the call dies (its connections reset, or end
// without a close frame). The
// provider's socket must stay open and its echoes go on in order; the
// other pod must be told Edge-Resumed: 1 and get first exactly the
// opening the provider sent, byte for byte, then media it never saw
// before; the timeline and the metrics must say so; and the provider's
// normal close must free the new pod.
func TestResumePodLostMidCallEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	for _, p := range []resumeProvider{twilioResume(), plivoResume(), exotelResume(), telnyxResume()} {
		for _, how := range []string{"reset", "fin"} {
			t.Run(p.name+"/"+how, func(t *testing.T) { resumeCall(t, p, how, true) })
		}
	}
}

// TestResumeOffPodLostMidCallEndsTheCall is the same Twilio call without
// proxy.resume: the pod's death ends the call with close 1014 to the
// provider, and no other pod hears of it.
func TestResumeOffPodLostMidCallEndsTheCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	resumeCall(t, twilioResume(), "reset", false)
}

// resumeMediaBefore and resumeMediaAfter are how many media messages are
// echoed before the pod dies and, at least, after.
const resumeMediaBefore, resumeMediaAfter = 10, 10

// resumeCall plays p's call through one edge with two pods, kills the
// call's pod mid-call (how: reset or fin, as e2eMortalPod.kill) and
// checks what the provider and the pods saw.
func resumeCall(t *testing.T, p resumeProvider, how string, resume bool) {
	f := newE2E(t)
	pods := map[string]*e2eMortalPod{"pod-a": newE2EMortalPod(t), "pod-b": newE2EMortalPod(t)}
	resumeYAML := ""
	if resume {
		resumeYAML = "proxy:\n  resume:\n    tiers: [\"*\"]\n"
	}
	e := f.start("edge", f.config("edge.yaml", `
allocator: {lease_ttl: 15s, renew_interval: 5s, call_info_ttl: 1h}
tiers: {gold: {type: exclusive, target: 2}}
default_chain: [gold]
providers:
  webhook_base_url: `+resumeBase+`
  plugins:
`+p.plugin+resumeYAML+podsYAML("gold", "pod-a", pods["pod-a"].addr(), "pod-b", pods["pod-b"].addr())))
	testwait.Until(t, 30*time.Second, "edge ready with its plugins and both pods", func() bool {
		return provGet(t, e.admin+"/readyz") == 200 &&
			edgetest.Pod(t, e.admin, "pod-a").Status == "available" && edgetest.Pod(t, e.admin, "pod-b").Status == "available"
	})

	ws := p.webhook(t, e)
	deadName, newName := "pod-a", "pod-b"
	if edgetest.Pod(t, e.admin, "pod-b").Lease == p.callID {
		deadName, newName = newName, deadName
	}
	if got := edgetest.Pod(t, e.admin, deadName).Lease; got != p.callID {
		t.Fatalf("after the webhook %s is leased to %q, want %q", deadName, got, p.callID)
	}
	dead, taker := pods[deadName], pods[newName]

	s := openProviderSocket(t, mediaOn(e, ws))
	for _, msg := range p.opening {
		s.send(t, msg)
	}
	// The provider streams its media at 20 ms a message from here on, as
	// it does whatever happens behind edge; the pod dies while it does.
	stopWriting, lastWritten := make(chan struct{}), make(chan int, 1)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for seq := 2; ; seq++ { // the start message is 1
			if s.c.Write(context.Background(), websocket.MessageText, []byte(p.media(seq))) != nil {
				lastWritten <- seq - 1
				return
			}
			select {
			case <-stopWriting:
				lastWritten <- seq
				return
			case <-tick.C:
			}
		}
	}()
	var echoed []providerEcho
	prev := 1
	// noticeAt is how many media echoes came before the provider's plugin's
	// notice of the move (-1: none yet): the dead pod's, all of them.
	noticeAt := -1
	notice := func(ev providerEcho) bool {
		if ev.err != nil || string(ev.msg) != p.notice || !resume || len(echoed) < resumeMediaBefore {
			return false
		}
		if noticeAt >= 0 {
			t.Fatalf("the provider was told of the move twice: %s", ev.msg)
		}
		noticeAt = len(echoed)
		return true
	}
	for len(echoed) < resumeMediaBefore+resumeMediaAfter {
		ev := s.next(t)
		if notice(ev) {
			continue
		}
		if ev.err != nil {
			close(stopWriting)
			if !resume && len(echoed) >= resumeMediaBefore {
				resumeOffChecks(t, ev.err, taker)
				return
			}
			t.Fatalf("the provider's socket ended after %d echoes: %v (close %d)", len(echoed), ev.err, websocket.CloseStatus(ev.err))
		}
		ev.seq = s.seqOf(t, ev.msg, prev)
		prev = ev.seq
		if echoed = append(echoed, ev); len(echoed) == resumeMediaBefore {
			dead.kill(how)
		}
	}
	if !resume {
		t.Fatalf("with proxy.resume off the call went on after its pod died (%d echoes)", len(echoed))
	}
	close(stopWriting)
	last := <-lastWritten
	for prev < last {
		ev := s.next(t)
		if notice(ev) {
			continue
		}
		if ev.err != nil {
			t.Fatalf("the provider's socket ended after its pod died: %v", ev.err)
		}
		ev.seq = s.seqOf(t, ev.msg, prev)
		prev = ev.seq
		echoed = append(echoed, ev)
	}

	// As the pods saw it: the dead pod served the call first, the other
	// took over with the opening the provider sent, then every media
	// message from the first the dead pod never read.
	deadSocks := dead.served()
	if len(deadSocks) != 1 || deadSocks[0].header.Get("Edge-Resumed") != "" {
		t.Fatalf("the dead pod served %d sockets, want the call's first, not resumed", len(deadSocks))
	}
	lastDead := 0
	for _, m := range deadSocks[0].msgs {
		if n, ok := mediaSeq(m); ok {
			lastDead = n
		}
	}
	takerSocks := taker.served()
	if len(takerSocks) != 1 {
		t.Fatalf("the other pod served %d sockets, want the resumed call's", len(takerSocks))
	}
	resumed := takerSocks[0]
	if got := resumed.header.Values("Edge-Resumed"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("the new pod's Edge-Resumed = %q, want [1]", got)
	}
	if len(resumed.msgs) <= len(p.opening) {
		t.Fatalf("the new pod got %d messages, want the opening's %d and media", len(resumed.msgs), len(p.opening))
	}
	for i, want := range p.opening {
		if !bytes.Equal(resumed.msgs[i], []byte(want)) {
			t.Errorf("the new pod's message %d = %s\nwant the provider's opening message %s", i, resumed.msgs[i], want)
		}
	}
	media := resumed.msgs[len(p.opening):]
	firstNew, ok := mediaSeq(media[0])
	if !ok || firstNew <= lastDead {
		t.Fatalf("the new pod's first message after the opening = %.100s; want media after %d, the last the dead pod read", media[0], lastDead)
	}
	for i, m := range media {
		if n, ok := mediaSeq(m); !ok || n != firstNew+i {
			t.Fatalf("the new pod's media message %d = %.100s; want sequence number %d", i, m, firstNew+i)
		}
	}
	if n, _ := mediaSeq(media[len(media)-1]); n != last {
		t.Errorf("the new pod's last media message is %d, the provider's %d", n, last)
	}
	if noticeAt < 0 {
		t.Fatalf("the provider was never told of the move: want %s", p.notice)
	}
	for i, ev := range echoed {
		if (i < noticeAt) != (ev.seq <= lastDead) {
			t.Fatalf("echo %d (sequence number %d) came on the wrong side of the notice of the move (after %d echoes; the dead pod read up to %d)",
				i, ev.seq, noticeAt, lastDead)
		}
	}
	var lastBefore, firstAfter providerEcho
	for _, ev := range echoed {
		if ev.seq <= lastDead {
			lastBefore = ev
		} else if firstAfter.seq == 0 {
			firstAfter = ev
		}
	}
	t.Logf("%s, %s: %v from the last echo of the dead pod (%d) to the first of the new one (%d); %d messages read by no pod",
		p.name, how, firstAfter.at.Sub(lastBefore.at).Round(time.Microsecond), lastBefore.seq, firstAfter.seq, firstNew-lastDead-1)

	// As edge tells it.
	call := mediaTimeline(t, e.admin, p.callID)
	if call["resumptions"] != 1.0 || !slices.Equal(anyStrings(call["moved_from"]), []string{deadName}) || call["pod_name"] != newName || call["resumed_at"] == nil {
		t.Errorf("timeline = %v; want resumptions 1, moved_from [%s], pod_name %s, resumed_at", call, deadName, newName)
	}
	out, err := exec.Command(f.bin, "admin", "--url", e.admin, "call", p.callID).CombinedOutput()
	for _, want := range []string{"\nresumptions: 1\n", "\nmoved_from: [\"" + deadName + "\"]\n", "\npod_name: " + newName + "\n"} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("edge admin call %s: %v\n%s\nwant %q", p.callID, err, out, strings.TrimSpace(want))
		}
	}
	if got := adminMetric(t, e.admin, `edge_proxy_resumptions_total{outcome="resumed"}`); got != "1" {
		t.Errorf(`edge_proxy_resumptions_total{outcome="resumed"} = %s, want 1`, got)
	}

	// The provider ends the call as it does, and the new pod is free.
	if stop := p.stop(last + 1); stop != "" {
		s.send(t, stop)
	}
	s.c.Close(websocket.StatusNormalClosure, "")
	taker.await(t, "the new pod's socket closed", func(ss []e2ePodSocket) bool { return ss[0].ended })
	if code := taker.served()[0].closeCode; code != websocket.StatusNormalClosure {
		t.Errorf("the new pod read close %d, want 1000", code)
	}
	testwait.Until(t, 5*time.Second, newName+" free after the provider closed", func() bool {
		pod := edgetest.Pod(t, e.admin, newName)
		return pod.Lease == "" && pod.Status == "available"
	})
	call = mediaTimeline(t, e.admin, p.callID)
	if call["state"] != "ended" || call["closed_by"] != "client" || call["close_code"] != "1000" || call["resumptions"] != 1.0 {
		t.Errorf("ended call's timeline = %v; want ended, closed by the client with 1000, one resumption", call)
	}
}

// resumeOffChecks checks a call without proxy.resume whose pod died:
// the provider is told 1014, the other pod never hears of the call.
func resumeOffChecks(t *testing.T, err error, other *e2eMortalPod) {
	t.Helper()
	if code := websocket.CloseStatus(err); code != websocket.StatusBadGateway {
		t.Errorf("the provider's socket ended with %v (close %d), want close 1014", err, code)
	}
	if n := len(other.served()); n != 0 {
		t.Errorf("the other pod served %d sockets of a call that may not move", n)
	}
}

func anyStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// providerSocket is the provider's side of a media socket: its echoes
// are read as they come, with the time each came.
type providerSocket struct {
	c      *websocket.Conn
	echoes chan providerEcho
}

type providerEcho struct {
	msg []byte
	seq int // of a media message
	at  time.Time
	err error // the socket's end
}

func openProviderSocket(t *testing.T, url string) *providerSocket {
	t.Helper()
	s := &providerSocket{c: mediaDial(t, url), echoes: make(chan providerEcho, 1024)}
	go func() {
		for {
			_, msg, err := s.c.Read(context.Background())
			s.echoes <- providerEcho{msg: msg, at: time.Now(), err: err}
			if err != nil {
				return
			}
		}
	}()
	return s
}

// next is the next echo, or the socket's end.
func (s *providerSocket) next(t *testing.T) providerEcho {
	t.Helper()
	select {
	case ev := <-s.echoes:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no echo nor close for 10s")
		return providerEcho{}
	}
}

func (s *providerSocket) send(t *testing.T, msg string) {
	t.Helper()
	if err := s.c.Write(context.Background(), websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("write %.60s: %v", msg, err)
	}
}

// seqOf is the sequence number of an echoed media message, which must
// come after prev.
func (s *providerSocket) seqOf(t *testing.T, msg []byte, prev int) int {
	t.Helper()
	n, ok := mediaSeq(msg)
	if !ok || n <= prev {
		t.Fatalf("echo %.100s after sequence number %d: want a later media message", msg, prev)
	}
	return n
}

// TestResumeConfigCheckedByCheckConfig runs `edge check-config` on
// proxy.resume: a YAML list of tiers and merchants is taken, a limit of 0
// and names that are not ids are refused naming the field.
func TestResumeConfigCheckedByCheckConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds edge")
	}
	bin := edgetest.Binary(t)
	good := edgetest.WriteFile(t, "good.yaml", "proxy:\n  resume:\n    tiers: [\"*\", gold]\n    merchants: [acme]\n    max_per_call: 2\n")
	if out, err := exec.Command(bin, "check-config", "--config", good).CombinedOutput(); err != nil {
		t.Fatalf("check-config of a valid proxy.resume: %v\n%s", err, out)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"max_per_call 0":   {"max_per_call: 0", "proxy.resume.max_per_call"},
		"tier with space":  {"tiers: [\"gold tier\"]", "proxy.resume.tiers[0]"},
		"merchant slash":   {"merchants: [ok, \"a/b\"]", "proxy.resume.merchants[1]"},
		"budget negative":  {"budget: -1s", "proxy.resume.budget"},
		"tiers not a list": {"tiers: {gold: 1}", "proxy.resume.tiers"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := edgetest.WriteFile(t, "bad.yaml", "proxy:\n  resume:\n    "+tc.yaml+"\n")
			out, err := exec.Command(bin, "check-config", "--config", cfg).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("check-config: %v, want a non-zero exit\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("check-config said:\n%s\nwant it to name %s", out, tc.want)
			}
		})
	}
}
