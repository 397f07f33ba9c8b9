package relaytest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// Relay starts a relay for env and returns how to hand it a socket (a
// TLS one's records taken over where the relay does that: Socket.TLS) and
// how to stop it (after its sockets ended).
type Relay func(t *testing.T, env relay.Env) (add func(*Socket), stop func())

// Conformance runs every relay scenario on r, with a plain and with a TLS
// provider: what each relay owes the provider, the pod and the host,
// whichever moves the bytes.
func Conformance(t *testing.T, r Relay) {
	for _, transport := range []string{"plain", "tls"} {
		t.Run(transport, func(t *testing.T) {
			for _, sc := range append(scenarios, moves...) {
				t.Run(sc.name, func(t *testing.T) {
					h := NewHost()
					add, stop := r(t, Env(h, sc.limits))
					s := NewSocket(t)
					if transport == "tls" {
						s = NewTLSSocket(t)
					}
					if sc.setup != nil {
						sc.setup(s.Socket)
					}
					add(s)
					sc.run(t, h, s)
					stop()
				})
			}
		})
	}
}

// scenario is one thing every relay must do alike: setup, when not nil,
// shapes the socket before the relay has it.
type scenario struct {
	name   string
	limits relay.Limits
	run    func(t *testing.T, h *Host, s *Socket)
	setup  func(*relay.Socket)
}

var scenarios = []scenario{
	{name: "messages both ways, then the provider's close", limits: relay.Limits{}, run: func(t *testing.T, h *Host, s *Socket) {
		s.Client.Write(t, true, wsproto.OpText, []byte(`{"event":"media"}`))
		if f := s.Pod.MustRead(t); f.Op != wsproto.OpText || string(f.Payload) != `{"event":"media"}` {
			t.Fatalf("the pod read %+v", f)
		}
		s.Pod.Write(t, true, wsproto.OpBinary, bytes.Repeat([]byte{5}, 70000))
		if f := s.Client.MustRead(t); f.Op != wsproto.OpBinary || len(f.Payload) != 70000 {
			t.Fatalf("the provider read op %d, %d bytes", f.Op, len(f.Payload))
		}
		s.Client.Write(t, true, 0x8, wsproto.CloseFrame(1000, "bye", nil)[2:])
		if code, _ := s.Pod.MustRead(t).Close(); code != 1000 {
			t.Fatalf("the pod read close %d, want 1000", code)
		}
		s.Pod.Write(t, true, 0x8, wsproto.CloseFrame(1000, "", nil)[2:])
		s.Pod.Conn.Close()
		if code, _ := s.Client.MustRead(t).Close(); code != 1000 {
			t.Fatalf("the provider read the pod's close %d, want 1000", code)
		}
		s.Client.Conn.Close()
		e := h.WaitEnded(t)
		if e.Result.By != relay.Client || e.Result.Code != 1000 || e.Counts.MessagesIn != 1 || e.Counts.MessagesOut != 1 {
			t.Errorf("ended %+v, want the provider's 1000 and one message each way", e)
		}
	}},
	{name: "the pod reset mid-call", limits: relay.Limits{}, run: func(t *testing.T, h *Host, s *Socket) {
		s.Client.Write(t, true, wsproto.OpText, []byte("hello"))
		s.Pod.MustRead(t)
		s.Pod.Conn.(interface{ SetLinger(int) error }).SetLinger(0)
		s.Pod.Conn.Close()
		if code, _ := s.Client.MustRead(t).Close(); code != wsproto.CloseBadGateway {
			t.Errorf("the provider read close %d, want 1014", code)
		}
		s.Client.Conn.Close()
		if e := h.WaitEnded(t); !e.Result.Lost || len(h.Lost()) != 1 {
			t.Errorf("ended %+v, lost %v: want the pod lost once", e, h.Lost())
		}
	}},
	{name: "a message over the limit", limits: relay.Limits{MaxMessageBytes: 100}, run: func(t *testing.T, h *Host, s *Socket) {
		s.Client.Write(t, true, wsproto.OpText, bytes.Repeat([]byte("x"), 200))
		if code, _ := s.Pod.MustRead(t).Close(); code != wsproto.CloseTooBig {
			t.Errorf("the pod read close %d, want 1009 and none of the message", code)
		}
		if code, _ := s.Client.MustRead(t).Close(); code != wsproto.CloseTooBig {
			t.Errorf("the provider read close %d, want 1009", code)
		}
		s.Client.Conn.Close()
		s.Pod.Conn.Close()
		h.WaitEnded(t)
	}},
	{name: "a hung pod is found by ping", limits: relay.Limits{PodPingInterval: 50 * time.Millisecond, PodSilence: 300 * time.Millisecond},
		run: func(t *testing.T, h *Host, s *Socket) {
			f := s.Pod.MustRead(t) // and never answered
			if f.Op != 0x9 || string(f.Payload) != wsproto.PingPayload {
				t.Fatalf("the pod read %+v, want edge's ping", f)
			}
			if code, reason := s.Client.MustRead(t).Close(); code != wsproto.CloseBadGateway {
				t.Errorf("the provider read close %d %q, want 1014", code, reason)
			}
			s.Client.Conn.Close()
			s.Pod.Conn.Close()
			h.WaitEnded(t)
			if lost := h.Lost(); len(lost) != 1 || !errors.Is(lost[0], relay.ErrPodHung) {
				t.Errorf("pods lost %v, want one hung", lost)
			}
		}},
	{name: "a quiet pod's pongs stay at edge", limits: relay.Limits{PodPingInterval: 50 * time.Millisecond, PodSilence: 300 * time.Millisecond},
		run: func(t *testing.T, h *Host, s *Socket) {
			for range 4 {
				f := s.Pod.MustRead(t)
				if f.Op != 0x9 {
					t.Fatalf("the pod read %+v, want edge's ping", f)
				}
				s.Pod.Write(t, true, 0xa, f.Payload)
			}
			s.Pod.Write(t, true, wsproto.OpText, []byte("after the pongs"))
			if f := s.Client.MustRead(t); f.Op != wsproto.OpText || string(f.Payload) != "after the pongs" {
				t.Errorf("the provider read %+v first, want the pod's message: edge's pongs stay at edge", f)
			}
			s.ClientLeaves()
			if e := h.WaitEnded(t); e.Result.Lost || len(h.Lost()) != 0 {
				t.Errorf("ended %+v, lost %v: a pod that answers lives", e, h.Lost())
			}
		}},
	{name: "the provider's silence", limits: relay.Limits{IdleTimeout: 100 * time.Millisecond}, run: func(t *testing.T, h *Host, s *Socket) {
		if code, _ := s.Client.MustRead(t).Close(); code != relay.CloseIdleTimeout {
			t.Errorf("the provider read close %d, want 4000", code)
		}
		if code, _ := s.Pod.MustRead(t).Close(); code != relay.CloseIdleTimeout {
			t.Errorf("the pod read close %d, want 4000", code)
		}
		s.Client.Conn.Close()
		s.Pod.Conn.Close()
		h.WaitEnded(t)
	}},
}
