package fakeagent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func startRecorded(t *testing.T, rec *Recorder, pod string) *Agent {
	t.Helper()
	ag, err := Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	ag.Record(rec, pod)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ag.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ag
}

// dialCall opens a socket to ag and sends call's Twilio start message.
func dialCall(t *testing.T, ag *Agent, call string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+ag.Addr()+"/media", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	send(t, c, fmt.Sprintf(`{"event":"start","streamSid":"MZ%[1]s","start":{"callSid":%[1]q,"streamSid":"MZ%[1]s","customParameters":{"merchant_id":"acme"}}}`, call))
	return c
}

// send writes msg and reads its echo, so the agent has read it.
func send(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.Read(ctx); err != nil || string(got) != msg {
		t.Fatalf("echo %q, %v", got, err)
	}
}

func hangUp(t *testing.T, rec *Recorder, c *websocket.Conn, pod string, left int) {
	t.Helper()
	c.Close(websocket.StatusNormalClosure, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rec.Wait(ctx, func() bool { return rec.Live(pod) == left }); err != nil {
		t.Fatalf("%s still has %d sockets", pod, rec.Live(pod))
	}
}

func TestRecorderSeesTwoCallsAtOnceOnOnePod(t *testing.T) {
	rec := NewRecorder()
	a, b := startRecorded(t, rec, "pod-a"), startRecorded(t, rec, "pod-b")
	start := time.Now()
	one := func(string) int { return 1 }

	// Back to back on pod-a, one at a time on pod-b: no overlap.
	c1 := dialCall(t, a, "CA1")
	send(t, c1, `{"event":"media","streamSid":"MZCA1"}`)
	hangUp(t, rec, c1, "pod-a", 0)
	c2 := dialCall(t, a, "CA2")
	c3 := dialCall(t, b, "CA3")
	if got := rec.Overlaps(start, one); len(got) != 0 {
		t.Fatalf("overlaps of calls one after the other: %+v", got)
	}

	// A second call while CA2 is open: the overlap names both.
	c4 := dialCall(t, a, "CA4")
	send(t, c4, `{"event":"media","streamSid":"MZCA2"}`) // another call's frame
	hangUp(t, rec, c4, "pod-a", 1)
	got := rec.Overlaps(start, one)
	if len(got) != 1 || got[0].Pod != "pod-a" || got[0].Most != 2 || fmt.Sprint(got[0].Calls) != "[CA2 CA4]" || got[0].Duration() <= 0 {
		t.Fatalf("overlaps: %+v", got)
	}
	if n := len(rec.Overlaps(start, func(string) int { return 2 })); n != 0 {
		t.Errorf("%d overlaps under a limit of 2", n)
	}
	if rec.Peak("pod-a") != 2 || rec.Peak("pod-b") != 1 {
		t.Errorf("peaks %d %d, want 2 1", rec.Peak("pod-a"), rec.Peak("pod-b"))
	}
	if got := rec.Overlaps(time.Now(), one); len(got) != 0 {
		t.Errorf("overlaps that ended before since: %+v", got)
	}

	hangUp(t, rec, c2, "pod-a", 0)
	hangUp(t, rec, c3, "pod-b", 0)
	byCall := map[string]Session{}
	for _, s := range rec.Sessions() {
		byCall[s.CallID] = s
	}
	if s := byCall["CA1"]; s.Pod != "pod-a" || s.Frames != 1 || s.Foreign != 0 || s.CloseCode != websocket.StatusNormalClosure || s.Params["merchant_id"] != "acme" {
		t.Errorf("CA1: %+v", s)
	}
	if s := byCall["CA4"]; s.Foreign != 1 {
		t.Errorf("CA4 carried another call's frame, recorded %d foreign", s.Foreign)
	}
	if rec.Live("") != 0 || rec.Started() != 0 {
		t.Errorf("live %d, started %d after every hang-up", rec.Live(""), rec.Started())
	}
}

// A socket dropped without a close frame ends its session too.
func TestRecorderEndsAKilledSocket(t *testing.T) {
	rec := NewRecorder()
	a := startRecorded(t, rec, "pod-a")
	dialCall(t, a, "CA1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rec.Wait(ctx, func() bool { return rec.Started() == 1 }); err != nil {
		t.Fatal(err)
	}
	a.Kill()
	if err := rec.Wait(ctx, func() bool { return rec.Live("pod-a") == 0 }); err != nil {
		t.Fatal("the killed socket is still open")
	}
	if s := rec.Sessions()[0]; s.Closed.IsZero() || s.CloseCode != -1 {
		t.Errorf("killed socket: %+v", s)
	}
}
