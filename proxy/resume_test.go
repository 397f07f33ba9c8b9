package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// mortalPod is a voice agent that echoes every message and can die on
// command, as a pod killed mid-call does: its connections reset, or end
// without a close frame, while it keeps listening (a restarted
// container). It records what each socket it served carried.
type mortalPod struct {
	t  testing.TB
	ln net.Listener

	mu      sync.Mutex
	sockets []*podSocket
	changed chan struct{}
}

// podSocket is one socket a mortalPod served.
type podSocket struct {
	conn   *net.TCPConn
	header http.Header
	events []string // the JSON event of each text message, in order
}

func newMortalPod(t testing.TB) *mortalPod {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &mortalPod{t: t, ln: ln, changed: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.serve(c.(*net.TCPConn))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.kill("reset")
		wg.Wait()
	})
	return p
}

func (p *mortalPod) addr() string { return p.ln.Addr().String() }

func (p *mortalPod) serve(c *net.TCPConn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if _, err := c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
		wsproto.AcceptKey(req.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n")); err != nil {
		return
	}
	s := &podSocket{conn: c, header: req.Header}
	p.mu.Lock()
	p.sockets = append(p.sockets, s)
	p.notifyLocked()
	p.mu.Unlock()
	for {
		fin, op, payload, err := readFrame(br)
		if err != nil || op == 0x8 {
			return
		}
		if op == 0x1 {
			var m struct {
				Event string `json:"event"`
			}
			json.Unmarshal(payload, &m)
			p.mu.Lock()
			s.events = append(s.events, m.Event)
			p.notifyLocked()
			p.mu.Unlock()
		}
		if _, err := c.Write(frame(fin, op, payload, nil)); err != nil {
			return
		}
	}
}

func (p *mortalPod) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// kill ends every open socket as a dying pod does: "reset" (RST) or "fin"
// (the stream ends without a close frame).
func (p *mortalPod) kill(how string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sockets {
		if how == "reset" {
			s.conn.SetLinger(0)
		}
		s.conn.Close()
	}
}

// served is a copy of what each socket carried so far.
func (p *mortalPod) served() []podSocket {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]podSocket, len(p.sockets))
	for i, s := range p.sockets {
		out[i] = podSocket{header: s.header, events: slices.Clone(s.events)}
	}
	return out
}

// readFrame reads one client frame and unmasks it.
func readFrame(br *bufio.Reader) (fin bool, op byte, payload []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(br, h[:]); err != nil {
		return
	}
	fin, op = h[0]&0x80 != 0, h[0]&0x0f
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		_, err = io.ReadFull(br, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		_, err = io.ReadFull(br, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	var mask [4]byte
	if err == nil && h[1]&0x80 != 0 {
		_, err = io.ReadFull(br, mask[:])
	}
	if err != nil || n > 1<<20 {
		return false, 0, nil, fmt.Errorf("frame header: %v", err)
	}
	payload = make([]byte, n)
	if _, err = io.ReadFull(br, payload); err != nil {
		return
	}
	if h[1]&0x80 != 0 {
		for i := range payload {
			payload[i] ^= mask[i%4]
		}
	}
	return
}

// twilioOpening names Twilio's stream opening, as its plugin does.
func twilioOpening(provider string) []string {
	if provider == "twilio" {
		return []string{"connected", "start"}
	}
	return nil
}

// resumeCfg opts tier gold's calls in.
func resumeCfg(c *Config) {
	failoverCfg(c)
	c.Resume = ResumeConfig{Tiers: []string{"gold"}, MaxPerCall: 3, Budget: 2 * time.Second}
}

// twilioCallOn allocates a Twilio call on pod (the other gold pods are
// given to calls that end at once, so they are free again) and returns
// its id and media URL.
func (e *env) twilioCallOn(pod string) (callID, url string) {
	e.t.Helper()
	ctx := context.Background()
	for i := range 4 {
		id := fmt.Sprintf("CA%d", i)
		al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: id, Creator: "provider:twilio"})
		if err != nil {
			e.t.Fatal(err)
		}
		if al.PodName == pod {
			callID, url = id, e.url(pod, e.signer.Mint(id, pod, agentPath))
			break
		}
		defer e.alloc.Release(ctx, id)
	}
	if callID == "" {
		e.t.Fatalf("no call landed on %s", pod)
	}
	return callID, url
}

// stream is a provider's media stream as Twilio sends it: connected,
// start, then a media message every interval, each echo checked.
type stream struct {
	t       testing.TB
	c       *websocket.Conn
	callID  string
	mu      sync.Mutex
	echoes  []echoed // media echoes, as they came
	ended   error    // the socket's end as the provider read it
	changed chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

type echoed struct {
	seq int
	at  time.Time
}

type twilioMsg struct {
	Event          string `json:"event"`
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	StreamSID      string `json:"streamSid,omitempty"`
	Start          *struct {
		CallSID   string `json:"callSid"`
		StreamSID string `json:"streamSid"`
	} `json:"start,omitempty"`
	Media *struct {
		Payload string `json:"payload"`
	} `json:"media,omitempty"`
}

// openStream dials url, sends the opening and streams media until close.
func openStream(t testing.TB, e *env, url, callID string, interval time.Duration) *stream {
	t.Helper()
	s := &stream{t: t, c: e.mustDial(url), callID: callID, changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.c.SetReadLimit(1 << 20)
	ctx := context.Background()
	sid := "MZ" + callID
	start := twilioMsg{Event: "start", SequenceNumber: "1", StreamSID: sid, Start: &struct {
		CallSID   string `json:"callSid"`
		StreamSID string `json:"streamSid"`
	}{callID, sid}}
	for _, m := range []twilioMsg{{Event: "connected"}, start} {
		b, _ := json.Marshal(m)
		if err := s.c.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	go s.read()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for seq := 2; ; seq++ {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			b, _ := json.Marshal(twilioMsg{Event: "media", SequenceNumber: fmt.Sprint(seq), StreamSID: sid,
				Media: &struct {
					Payload string `json:"payload"`
				}{"AAAA"}})
			if s.c.Write(ctx, websocket.MessageText, b) != nil {
				return
			}
		}
	}()
	return s
}

func (s *stream) read() {
	for {
		_, b, err := s.c.Read(context.Background())
		s.mu.Lock()
		if err != nil {
			s.ended = err
			close(s.changed)
			s.mu.Unlock()
			return
		}
		var m twilioMsg
		if json.Unmarshal(b, &m) == nil && m.Event == "media" {
			var seq int
			fmt.Sscan(m.SequenceNumber, &seq)
			s.echoes = append(s.echoes, echoed{seq, time.Now()})
			close(s.changed)
			s.changed = make(chan struct{})
		}
		s.mu.Unlock()
	}
}

// waitEchoes waits until n media echoes came, or the socket ended.
func (s *stream) waitEchoes(n int) {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		got, ended, ch := len(s.echoes), s.ended, s.changed
		s.mu.Unlock()
		switch {
		case got >= n:
			return
		case ended != nil:
			s.t.Fatalf("the provider's socket ended after %d echoes: %v", got, ended)
		}
		select {
		case <-ch:
		case <-timeout:
			s.t.Fatalf("%d media echoes after 10s, want %d", got, n)
		}
	}
}

func (s *stream) snapshot() ([]echoed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.echoes), s.ended
}

// close ends the stream as a provider hanging up does (1000).
func (s *stream) close() {
	close(s.stop)
	<-s.done
	s.c.Close(websocket.StatusNormalClosure, "")
}

// inOrder reports the first echo out of order, -1 when none is.
func inOrder(es []echoed) int {
	for i := 1; i < len(es); i++ {
		if es[i].seq <= es[i-1].seq {
			return i
		}
	}
	return -1
}

// A call whose pod dies mid-call (reset, or its stream ending without a
// close frame) moves to another pod of its chain: the provider's socket
// stays open, the new pod is told it resumes a call and gets the
// stream's opening again, the media echoes on in order, and the call's
// record and the metrics show the move. The call ends normally after.
func TestPodLostMidCallResumes(t *testing.T) {
	for _, how := range []string{"reset", "fin"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, envOpt{cfg: resumeCfg, opening: twilioOpening})
			rec := fakeagent.NewRecorder()
			for name, ag := range e.agents {
				ag.Record(rec, name)
			}
			mortal := newMortalPod(t)
			e.addPod("pod-x", "gold", mortal.addr())
			callID, url := e.twilioCallOn("pod-x")
			s := openStream(t, e, url, callID, 5*time.Millisecond)
			s.waitEchoes(10)
			mortal.kill(how)
			before, _ := s.snapshot()
			s.waitEchoes(len(before) + 20)

			echoes, ended := s.snapshot()
			if ended != nil {
				t.Fatalf("the provider's socket ended: %v", ended)
			}
			if i := inOrder(echoes); i >= 0 {
				t.Errorf("echo %d out of order: seq %d after %d", i, echoes[i].seq, echoes[i-1].seq)
			}
			// The new pod: told it resumes, given the opening again, and
			// serving the call's media.
			var took []fakeagent.Session
			for _, ss := range rec.Sessions() {
				if ss.CallID == callID {
					took = append(took, ss)
				}
			}
			if len(took) != 1 || took[0].Frames == 0 || took[0].Foreign != 0 {
				t.Fatalf("sessions of the call on the other pods: %+v; want one with its media", took)
			}
			hs := e.agents[took[0].Pod].Headers()
			if got := hs[len(hs)-1].Get(ResumedHeader); got != "1" {
				t.Errorf("new pod's %s = %q, want 1", ResumedHeader, got)
			}
			if got := mortal.served()[0].events[:2]; !slices.Equal(got, []string{"connected", "start"}) {
				t.Errorf("first pod's opening = %v", got)
			}
			tl, err := e.alloc.Timeline(context.Background(), callID)
			if err != nil || tl.Resumptions != 1 || !slices.Equal(tl.MovedFrom, []string{"pod-x"}) || tl.Pod != took[0].Pod || tl.ResumedAt.IsZero() {
				t.Errorf("timeline = %+v, %v; want one resumption off pod-x onto %s", tl, err, took[0].Pod)
			}
			if got := value(e.px.metrics.resumptions.WithLabelValues("resumed")); got != 1 {
				t.Errorf("resumed = %v, want 1", got)
			}

			s.close()
			e.waitSockets(0)
			tl, _ = e.alloc.Timeline(context.Background(), callID)
			if tl.State != "ended" || tl.ClosedBy != "client" || tl.CloseCode != "1000" || tl.Resumptions != 1 {
				t.Errorf("ended call's record = %+v; want closed by the client with 1000, one resumption", tl)
			}
			if owner := e.podOwner(took[0].Pod); owner != "" {
				t.Errorf("the new pod is still held by %q", owner)
			}
		})
	}
}

// Where the call cannot move, it ends as without proxy.resume: 1014 to
// the provider, released as pod_lost. No other pod in the chain, a call
// not opted in, a provider that names no opening, and a stream that did
// not open as its provider does.
func TestPodLostMidCallWithoutAMove(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     func(*Config)
		opening func(string) []string
		// noPods takes every other pod out of allocation.
		noPods  bool
		outcome string // the resumption outcome counted ("": none)
		first   string // the first message's event ("": connected)
	}{
		{name: "no other pod", cfg: resumeCfg, opening: twilioOpening, noPods: true, outcome: "no_pod"},
		{name: "tier not opted in", cfg: func(c *Config) { failoverCfg(c); c.Resume.Tiers = []string{"basic"} }, opening: twilioOpening},
		{name: "provider names no opening", cfg: resumeCfg},
		{name: "opening unlike the provider's", cfg: resumeCfg, opening: twilioOpening, first: "media", outcome: "opening_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpt{cfg: tc.cfg, opening: tc.opening})
			mortal := newMortalPod(t)
			e.addPod("pod-x", "gold", mortal.addr())
			callID, url := e.twilioCallOn("pod-x")
			if tc.noPods {
				for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
					if _, err := e.alloc.Drain(context.Background(), pod); err != nil {
						t.Fatal(err)
					}
				}
			}
			c := e.mustDial(url)
			ctx := context.Background()
			first := tc.first
			if first == "" {
				first = "connected"
			}
			for _, ev := range []string{first, "start", "media"} {
				if err := c.Write(ctx, websocket.MessageText, []byte(`{"event":"`+ev+`"}`)); err != nil {
					t.Fatal(err)
				}
				if _, _, err := c.Read(ctx); err != nil {
					t.Fatal(err)
				}
			}
			mortal.kill("reset")
			if got := readClose(t, c); got != closeBadGateway {
				t.Errorf("provider read close %d, want %d", got, closeBadGateway)
			}
			e.waitSockets(0)
			if tl, err := e.alloc.Timeline(ctx, callID); err != nil || tl.SocketEnd != "pod_lost" || tl.Resumptions != 0 {
				t.Errorf("timeline = %+v, %v; want pod_lost, no resumption", tl, err)
			}
			for _, o := range resumeOutcomes {
				want := 0.0
				if o == tc.outcome {
					want = 1
				}
				if got := value(e.px.metrics.resumptions.WithLabelValues(o)); got != want {
					t.Errorf("resumptions{outcome=%q} = %v, want %v", o, got, want)
				}
			}
		})
	}
}

// A client cannot tell a pod it resumes a call: its own header of that
// name never reaches the pod.
func TestClientCannotForgeResumed(t *testing.T) {
	e := newEnv(t, envOpt{cfg: resumeCfg, opening: twilioOpening})
	pod, url := e.allocate("CA1", "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{ResumedHeader: {"7"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	echo(t, c, "hello")
	hs := e.agents[pod].Headers()
	if got := hs[len(hs)-1].Values(ResumedHeader); len(got) != 0 {
		t.Errorf("pod got %s %v from the client", ResumedHeader, got)
	}
}
