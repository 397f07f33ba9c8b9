package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// twilioAfterMove is what Twilio's plugin declares of a move: clear the
// stream, and a mark's echo belongs to the pod that sent it.
func twilioAfterMove(provider string) AfterMove {
	if provider != "twilio" {
		return AfterMove{}
	}
	return AfterMove{Notices: []string{`{"event":"clear","streamSid":"{{start.streamSid}}"}`},
		Legs: []LegEvent{{Sent: "mark", Name: "mark.name"}}}
}

// twilioMark is a mark of the stream rawOpening opens, as a pod sends it
// and as Twilio echoes it.
func twilioMark(name string) string {
	return `{"event":"mark","streamSid":"MZ1","mark":{"name":"` + name + `"}}`
}

// movedCall opens a Twilio call on a mortal pod through a proxy that
// knows what Twilio's plugin declares of a move, the stream opened; the
// call can move only to the second mortal pod.
func movedCall(t *testing.T, relay Relay) (e *env, first, next *mortalPod, m *mediaConn) {
	e = newEnv(t, envOpt{relay: relay, cfg: resumeCfg, opening: twilioOpening, afterMove: twilioAfterMove})
	for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
		if _, err := e.alloc.Drain(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	first, next = newMortalPod(t), newMortalPod(t)
	e.addPod("pod-x", "gold", first.addr())
	e.addPod("pod-y", "gold", next.addr())
	callID, url := e.twilioCallOn("pod-x")
	m = dialMedia(t, e, nil, "plain", url, nil)
	if _, err := m.Write(rawOpening(callID)); err != nil {
		t.Fatal(err)
	}
	readEcho(t, m)
	readEcho(t, m)
	return e, first, next, m
}

// send writes text messages as a provider does, masked.
func send(t *testing.T, m *mediaConn, msgs ...string) {
	t.Helper()
	var b []byte
	for _, msg := range msgs {
		b = append(b, frame(true, 1, []byte(msg), &[4]byte{5, 6, 7, 8})...)
	}
	if _, err := m.Write(b); err != nil {
		t.Fatal(err)
	}
}

// After a move the provider's first message from edge, before anything
// of the new pod, is the plugin's notice filled from the stream's
// opening: Twilio clears the stream, so the audio the dead pod queued
// stops.
func TestMoveClearsTheProvidersStream(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e, first, _, m := movedCall(t, relay)
		first.kill("reset")
		e.waitResumed(1)
		want := []string{`{"event":"clear","streamSid":"MZ1"}`, `{"event":"connected"}`}
		for i, w := range want {
			if got := readEcho(t, m); got != w {
				t.Fatalf("message %d after the move: %q, want %q", i+1, got, w)
			}
		}
	})
}

// The provider's echoes of marks the dead pod sent never reach the pod
// the call moved to (Twilio echoes every pending mark on clear); the new
// pod's own marks' echoes do, and so does a mark nobody sent.
func TestDeadPodsMarksStayWithIt(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		e, first, next, m := movedCall(t, relay)
		// The pod sends marks (the mortal pod echoes the provider's
		// messages: its echo is the pod's mark).
		send(t, m, twilioMark("dead-1"), twilioMark("dead-2"))
		readEcho(t, m)
		readEcho(t, m)
		first.kill("reset")
		e.waitResumed(1)
		// The notice, then the new pod's echo of the opening.
		for !strings.HasPrefix(readEcho(t, m), `{"event":"start"`) {
		}
		media := func(seq string) string { return `{"event":"media","sequenceNumber":"` + seq + `"}` }
		// The provider echoes the dead pod's marks, one in the same read as
		// media; then a mark of a name nobody sent, which the new pod echoes
		// (its own mark).
		send(t, m, twilioMark("dead-1"), media("9"), twilioMark("dead-2"), twilioMark("new-1"))
		for _, want := range []string{media("9"), twilioMark("new-1")} {
			if got := readEcho(t, m); got != want {
				t.Fatalf("the new pod echoed %q, want %q", got, want)
			}
		}
		// The provider echoes the new pod's mark: it is the new pod's.
		send(t, m, twilioMark("new-1"), media("10"))
		for _, want := range []string{twilioMark("new-1"), media("10")} {
			if got := readEcho(t, m); got != want {
				t.Fatalf("the new pod echoed %q, want %q", got, want)
			}
		}
		if want := []string{"connected", "start", "mark", "mark"}; !slices.Equal(first.served()[0].events, want) {
			t.Errorf("the dead pod read %q, want %q", first.served()[0].events, want)
		}
		if want := []string{"connected", "start", "media", "mark", "mark", "media"}; !slices.Equal(next.served()[0].events, want) {
			t.Errorf("the new pod read %q, want %q: no echo of the dead pod's marks", next.served()[0].events, want)
		}
	})
}
