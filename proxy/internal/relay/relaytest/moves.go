package relaytest

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// The moves every relay makes alike: a socket that may move
// (relay.Socket.Resume) whose pod dies mid-call goes on with another pod,
// the provider's socket open throughout.

// mayMove shapes a socket to move, keeping its first message as the
// stream's opening, with Twilio's marks as leg events.
func mayMove(s *relay.Socket) {
	s.Resume, s.Opening, s.OpeningMax = true, 1, 4096
	s.Legs = []relay.LegEvent{{Sent: "mark", Echo: "mark", Name: []string{"mark", "name"}}}
}

var (
	opening = []byte(`{"event":"start"}`)
	clear   = []byte(`{"event":"clear"}`)
)

// started opens a stream that may move: the opening, relayed to the pod.
func started(t *testing.T, s *Socket) {
	t.Helper()
	s.Client.Write(t, true, wsproto.OpText, opening)
	if f := s.Pod.MustRead(t); !bytes.Equal(f.Payload, opening) {
		t.Fatalf("the pod read %q, want the opening", f.Payload)
	}
}

// expect reads the next frame of p and fails unless it is a text message
// of want.
func expect(t *testing.T, p *Peer, who string, want []byte) {
	t.Helper()
	if f := p.MustRead(t); f.Op != wsproto.OpText || !bytes.Equal(f.Payload, want) {
		t.Fatalf("%s read op %d %q, want %q", who, f.Op, f.Payload, want)
	}
}

// ends closes the test's ends of a socket as a provider that hangs up, and
// returns the socket's end.
func ends(t *testing.T, h *Host, s *Socket, pod *Peer) Ended {
	t.Helper()
	s.Client.Write(t, true, 0x8, wsproto.CloseFrame(1000, "", nil)[2:])
	if code, _ := pod.MustRead(t).Close(); code != 1000 {
		t.Fatalf("the new pod read close %d, want the provider's 1000", code)
	}
	pod.Write(t, true, 0x8, wsproto.CloseFrame(1000, "", nil)[2:])
	pod.Conn.Close()
	s.Client.MustRead(t)
	s.Client.Conn.Close()
	return h.WaitEnded(t)
}

var moves = []scenario{
	{name: "a dead pod's call moves on, the provider told first", setup: mayMove, run: func(t *testing.T, h *Host, s *Socket) {
		pods := make(chan net.Conn, 1)
		relayEnd, next := NewPod(t)
		pods <- relayEnd
		h.MoveTo(pods, wsproto.Frame(true, wsproto.OpText, []byte("hello from the new pod"), nil), wsproto.Frame(true, wsproto.OpText, clear, nil))
		started(t, s)
		s.Pod.Reset()
		expect(t, next, "the new pod", opening) // replayed by the host
		expect(t, s.Client, "the provider", clear)
		expect(t, s.Client, "the provider", []byte("hello from the new pod"))
		s.Client.Write(t, true, wsproto.OpText, []byte("media"))
		expect(t, next, "the new pod", []byte("media"))
		next.Write(t, true, wsproto.OpText, []byte("answer"))
		expect(t, s.Client, "the provider", []byte("answer"))
		e := ends(t, h, s, next)
		if e.Result.Lost || len(h.Lost()) != 0 || e.Result.By != relay.Client || e.Result.Code != 1000 {
			t.Errorf("ended %+v, lost %v: want the provider's 1000 and no pod lost", e, h.Lost())
		}
		if m := h.Moves(); len(m) != 1 || !bytes.Equal(m[0].Opening, wsproto.Frame(true, wsproto.OpText, opening, &[4]byte{7, 1, 3, 9})) || m[0].Torn {
			t.Errorf("moves %+v, want one with the opening as the provider sent it", m)
		}
		if e.Counts.MessagesIn != 2 || e.Counts.MessagesOut != 2 {
			t.Errorf("counted %d in, %d out; want 2 and 2, every pod's share (the replay is not relayed)", e.Counts.MessagesIn, e.Counts.MessagesOut)
		}
	}},
	{name: "a move that cannot be made ends as the pod's loss", setup: mayMove, run: func(t *testing.T, h *Host, s *Socket) {
		started(t, s)
		s.Pod.Reset()
		if code, _ := s.Client.MustRead(t).Close(); code != wsproto.CloseBadGateway {
			t.Errorf("the provider read close %d, want 1014", code)
		}
		s.Client.Conn.Close()
		if e := h.WaitEnded(t); !e.Result.Lost || len(h.Lost()) != 1 || len(h.Moves()) != 1 {
			t.Errorf("ended %+v, lost %v, %d moves: want one move asked for and the pod lost once", e, h.Lost(), len(h.Moves()))
		}
	}},
	{name: "a stop during a move is delivered on the new leg", setup: mayMove, run: func(t *testing.T, h *Host, s *Socket) {
		relayEnd, next := NewPod(t)
		h.OnResume(func(rs *relay.Socket, m relay.Move) (relay.Moved, error) {
			rs.Stop(1001, "draining")
			relayEnd.Write(m.Opening)
			return relay.Moved{Pod: relayEnd}, nil
		})
		started(t, s)
		s.Pod.Conn.Close() // a FIN without a close frame
		expect(t, next, "the new pod", opening)
		if code, _ := next.MustRead(t).Close(); code != 1001 {
			t.Errorf("the new pod read close %d, want edge's 1001", code)
		}
		if code, _ := s.Client.MustRead(t).Close(); code != 1001 {
			t.Errorf("the provider read close %d, want edge's 1001", code)
		}
		next.Conn.Close()
		s.Client.Conn.Close()
		if e := h.WaitEnded(t); e.Result.Lost || e.Result.Code != 1001 {
			t.Errorf("ended %+v, want edge's 1001 and no pod lost", e)
		}
	}},
	{name: "the new pod gets nothing of a message the dead one had part of", setup: mayMove, run: func(t *testing.T, h *Host, s *Socket) {
		pods := make(chan net.Conn, 1)
		relayEnd, next := NewPod(t)
		pods <- relayEnd
		h.MoveTo(pods, nil, nil)
		started(t, s)
		s.Client.Write(t, false, wsproto.OpText, []byte("first half"))
		if f := s.Pod.MustRead(t); string(f.Payload) != "first half" {
			t.Fatalf("the pod read %q", f.Payload)
		}
		s.Pod.Reset()
		expect(t, next, "the new pod", opening)
		s.Client.Write(t, true, 0x0, []byte("second half"))
		s.Client.Write(t, true, wsproto.OpText, []byte("whole"))
		expect(t, next, "the new pod", []byte("whole"))
		ends(t, h, s, next)
	}},
	{name: "the provider's answers to a dead pod's marks stay", setup: mayMove, run: func(t *testing.T, h *Host, s *Socket) {
		pods := make(chan net.Conn, 1)
		relayEnd, next := NewPod(t)
		pods <- relayEnd
		h.MoveTo(pods, nil, nil)
		started(t, s)
		mark := func(name string) []byte { return []byte(`{"event":"mark","mark":{"name":"` + name + `"}}`) }
		s.Pod.Write(t, true, wsproto.OpText, mark("old"))
		expect(t, s.Client, "the provider", mark("old"))
		s.Pod.Reset()
		expect(t, next, "the new pod", opening)
		next.Write(t, true, wsproto.OpText, mark("new"))
		expect(t, s.Client, "the provider", mark("new"))
		s.Client.Write(t, true, wsproto.OpText, mark("old"))
		s.Client.Write(t, true, wsproto.OpText, mark("new"))
		expect(t, next, "the new pod", mark("new"))
		ends(t, h, s, next)
	}},
	{name: "a hung pod's call moves", setup: mayMove, limits: relay.Limits{PodPingInterval: 50 * time.Millisecond, PodSilence: 300 * time.Millisecond},
		run: func(t *testing.T, h *Host, s *Socket) {
			pods := make(chan net.Conn, 1)
			relayEnd, next := NewPod(t)
			pods <- relayEnd
			h.MoveTo(pods, nil, nil)
			started(t, s)
			if f := s.Pod.MustRead(t); f.Op != 0x9 {
				t.Fatalf("the pod read %+v, want edge's ping", f) // and never answers
			}
			expect(t, next, "the new pod", opening)
			if m := h.Moves(); len(m) != 1 || !errors.Is(m[0].Cause, relay.ErrPodHung) {
				t.Errorf("moves %+v, want one for a hung pod", m)
			}
			f := next.MustRead(t)
			if f.Op != 0x9 {
				t.Fatalf("the new pod read %+v, want edge's ping", f)
			}
			next.Write(t, true, 0xa, f.Payload)
			s.Client.Write(t, true, wsproto.OpText, []byte("media"))
			for f := next.MustRead(t); f.Op == 0x9; f = next.MustRead(t) {
				next.Write(t, true, 0xa, f.Payload)
			}
			ends(t, h, s, next)
		}},
}
