package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/internal/mediacontract"
	"github.com/edge-voice/edge/internal/testwait"
	"github.com/edge-voice/edge/proxy/internal/relay/relaytest"
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
	gone    chan struct{} // closed when the test ends
	// quiet: the pod reads and never answers; protocol: the subprotocol
	// its 101 chooses (both set before it serves).
	quiet    bool
	protocol string
	// refuse: the status the pod answers every upgrade with (0: 101).
	refuse int
	// crashOn: the pod dies (a reset) on reading a text message of this
	// event, as an agent that crashes on a stream's opening does;
	// crashes counts those deaths.
	crashOn string
	crashes int
	// pings counts the pings the pod answered (with a pong, as RFC 6455
	// asks, quiet or not).
	pings int
}

// podSocket is one socket a mortalPod served.
type podSocket struct {
	conn   *net.TCPConn
	header http.Header
	events []string // the JSON event of each text message, in order
	read   int      // bytes read past the upgrade
	// closeCode is the close frame's code the pod read (0: none).
	closeCode int
	// wmu orders the echoes and a tear's bytes; hung stops the reads.
	wmu  sync.Mutex
	hung chan struct{}
}

// countingReader counts a socket's bytes as the pod reads them.
type countingReader struct {
	p *mortalPod
	s *podSocket
	r io.Reader
}

func (c countingReader) Read(b []byte) (int, error) {
	select {
	case <-c.s.hung:
		<-c.p.gone // a hung pod never reads again, until the test ends
		return 0, io.EOF
	default:
	}
	n, err := c.r.Read(b)
	c.p.mu.Lock()
	c.s.read += n
	c.p.notifyLocked()
	c.p.mu.Unlock()
	return n, err
}

func newMortalPod(t testing.TB) *mortalPod {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &mortalPod{t: t, ln: ln, changed: make(chan struct{}), gone: make(chan struct{})}
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
		close(p.gone)
		p.mu.Lock()
		for _, s := range p.sockets {
			s.conn.Close()
		}
		p.mu.Unlock()
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
	if p.refuse != 0 {
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", p.refuse, http.StatusText(p.refuse))
		return
	}
	chosen := ""
	if p.protocol != "" {
		chosen = "Sec-WebSocket-Protocol: " + p.protocol + "\r\n"
	}
	if _, err := c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + chosen +
		"Sec-WebSocket-Accept: " + wsproto.AcceptKey(req.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n")); err != nil {
		return
	}
	s := &podSocket{conn: c, header: req.Header, hung: make(chan struct{})}
	p.mu.Lock()
	p.sockets = append(p.sockets, s)
	p.notifyLocked()
	p.mu.Unlock()
	fr := bufio.NewReader(countingReader{p, s, br})
	for {
		fin, op, payload, err := readFrame(fr)
		if err != nil {
			return
		}
		if op == 0x9 {
			s.wmu.Lock()
			_, err = c.Write(frame(true, 0xa, payload, nil))
			s.wmu.Unlock()
			p.mu.Lock()
			p.pings++
			p.notifyLocked()
			p.mu.Unlock()
			if err != nil {
				return
			}
			continue
		}
		if op == 0x8 {
			if len(payload) >= 2 {
				p.mu.Lock()
				s.closeCode = int(binary.BigEndian.Uint16(payload))
				p.mu.Unlock()
			}
			return
		}
		if op == 0x1 {
			var m struct {
				Event string `json:"event"`
			}
			json.Unmarshal(payload, &m)
			p.mu.Lock()
			s.events = append(s.events, m.Event)
			crash := p.crashOn != "" && m.Event == p.crashOn
			if crash {
				p.crashes++
			}
			p.notifyLocked()
			p.mu.Unlock()
			if crash {
				c.SetLinger(0)
				return
			}
		}
		if p.quiet {
			continue
		}
		s.wmu.Lock()
		_, err = c.Write(frame(fin, op, payload, nil))
		s.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

func (p *mortalPod) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// kill ends every open socket as a dying pod does: "reset" (RST), "fin"
// (the stream ends without a close frame), "hang" (it never reads again,
// its connection open), "tear" (it sends half a message, then resets).
func (p *mortalPod) kill(how string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sockets {
		switch how {
		case "hang":
			close(s.hung)
			continue
		case "tear":
			s.wmu.Lock()
			s.conn.Write(frame(true, 1, bytes.Repeat([]byte("x"), 100), nil)[:12])
			s.wmu.Unlock()
			fallthrough
		case "reset":
			s.conn.SetLinger(0)
		}
		s.conn.Close()
	}
}

// waitRead waits until socket i read at least n bytes past its upgrade.
func (p *mortalPod) waitRead(i, n int) {
	p.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		got, ch := 0, p.changed
		if i < len(p.sockets) {
			got = p.sockets[i].read
		}
		p.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			p.t.Fatalf("the pod's socket %d read %d bytes, want %d", i, got, n)
		}
	}
}

// served is what a pod's socket carried: its upgrade's header, the event
// of each text message and the close code read (0: none).
type served struct {
	header    http.Header
	events    []string
	closeCode int
}

// served is a copy of what each socket carried so far.
func (p *mortalPod) served() []served {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]served, len(p.sockets))
	for i, s := range p.sockets {
		out[i] = served{header: s.header, events: slices.Clone(s.events), closeCode: s.closeCode}
	}
	return out
}

// readFrame reads one frame and unmasks it (the relays' test kit's).
func readFrame(br *bufio.Reader) (fin bool, op byte, payload []byte, err error) {
	f, err := relaytest.ReadFrame(br)
	return f.Fin, f.Op, f.Payload, err
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
	// pauseOnce closes stop.
	pauseOnce sync.Once
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

// openStream dials url, sends the opening and streams media until close,
// a message of payload bytes every interval.
func openStream(t testing.TB, e *env, url, callID string, interval time.Duration, payload int) *stream {
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
				}{strings.Repeat("A", payload)}})
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

// pause stops sending media; the echoes are still read.
func (s *stream) pause() {
	s.pauseOnce.Do(func() { close(s.stop) })
	<-s.done
}

// close ends the stream as a provider hanging up does (1000).
func (s *stream) close() {
	s.pause()
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

// A call whose pod dies mid-call (a reset, its stream ending without a
// close frame, or a hung pod that stops reading) moves to another pod of its chain: the provider's socket
// stays open, the new pod is told it resumes a call and gets the
// stream's opening again, the media echoes on in order, and the call's
// record and the metrics show the move. The call ends normally after.
func TestPodLostMidCallResumes(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		for _, how := range []string{"reset", "fin", "hang"} {
			t.Run(how, func(t *testing.T) {
				// A hung pod is found out once its socket buffers are full and
				// a write to it made no progress for pod_write_timeout: big
				// messages fill them fast.
				payload, every := 4, 5*time.Millisecond
				cfg := resumeCfg
				if how == "hang" {
					payload, every = 16<<10, 2*time.Millisecond
					cfg = func(c *Config) { resumeCfg(c); c.PodWriteTimeout = 300 * time.Millisecond }
				}
				e := newEnv(t, envOpt{cfg: cfg, opening: twilioOpening, relay: relay})
				rec := fakeagent.NewRecorder()
				for name, ag := range e.agents {
					ag.Record(rec, name)
				}
				mortal := newMortalPod(t)
				e.addPod("pod-x", "gold", mortal.addr())
				callID, url := e.twilioCallOn("pod-x")
				s := openStream(t, e, url, callID, every, payload)
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
				e.wantCarriedBy(relay)

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
	})
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
		// pad makes the start message this much bigger.
		pad int
	}{
		{name: "no other pod", cfg: resumeCfg, opening: twilioOpening, noPods: true, outcome: "no_pod"},
		{name: "tier not opted in", cfg: func(c *Config) { failoverCfg(c); c.Resume.Tiers = []string{"basic"} }, opening: twilioOpening, outcome: "not_enabled"},
		{name: "provider names no opening", cfg: resumeCfg, outcome: "not_enabled"},
		{name: "opening unlike the provider's", cfg: resumeCfg, opening: twilioOpening, first: "media", outcome: "opening_mismatch"},
		{name: "opening too big to keep", cfg: resumeCfg, opening: twilioOpening, pad: maxOpeningBytes, outcome: "no_opening"},
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
				msg := `{"event":"` + ev + `"}`
				if ev == "start" && tc.pad > 0 {
					msg = `{"event":"start","start":{"customParameters":{"p":"` + strings.Repeat("x", tc.pad) + `"}}}`
				}
				if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
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
			// Each ending says why, in the provider's close and the record.
			if tl, err := e.alloc.Timeline(ctx, callID); err != nil || tl.SocketEnd != "pod_lost" || tl.Resumptions != 0 ||
				tl.CloseReason != "pod lost: reset, "+tc.outcome {
				t.Errorf("timeline = %+v, %v; want pod_lost, no resumption, the reason naming %s", tl, err, tc.outcome)
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

// openingFrames are the Twilio opening a raw client sends, masked.
func rawOpening(callID string) []byte {
	mask := &[4]byte{9, 9, 9, 9}
	return append(frame(true, 1, []byte(`{"event":"connected"}`), mask),
		frame(true, 1, []byte(`{"event":"start","start":{"callSid":"`+callID+`","streamSid":"MZ1"},"streamSid":"MZ1"}`), mask)...)
}

// readEcho reads one unmasked text frame and returns its payload.
func readEcho(t *testing.T, m *mediaConn) string {
	t.Helper()
	fin, op, payload, err := readFrame(m.br)
	if err != nil || !fin || op != 1 {
		t.Fatalf("read an echo: fin %v opcode %d % x, %v", fin, op, payload, err)
	}
	return string(payload)
}

// waitResumed waits until the proxy counted n moves.
func (e *env) waitResumed(n float64) {
	e.t.Helper()
	testwait.Until(e.t, 10*time.Second, "the call moved", func() bool {
		return value(e.px.metrics.resumptions.WithLabelValues("resumed")) >= n
	})
}

// A pod that dies inside a client's message had part of it: the new pod
// gets the opening, then nothing of that message, then the next whole
// one. Anything else would be a torn frame to the new pod.
func TestMoveDropsTheRestOfAPartialMessage(t *testing.T) {
	e := newEnv(t, envOpt{cfg: resumeCfg, opening: twilioOpening})
	mortal := newMortalPod(t)
	e.addPod("pod-x", "gold", mortal.addr())
	callID, url := e.twilioCallOn("pod-x")
	m := dialMedia(t, e, nil, "plain", url, nil)
	opening := rawOpening(callID)
	if _, err := m.Write(opening); err != nil {
		t.Fatal(err)
	}
	readEcho(t, m)
	readEcho(t, m)
	big := frame(true, 2, bytes.Repeat([]byte{7}, 1000), &[4]byte{1, 2, 3, 4})
	if _, err := m.Write(big[:400]); err != nil {
		t.Fatal(err)
	}
	mortal.waitRead(0, len(opening)+400)
	mortal.kill("reset")
	e.waitResumed(1)
	next := `{"event":"media","sequenceNumber":"9"}`
	if _, err := m.Write(append(big[400:], frame(true, 1, []byte(next), &[4]byte{4, 3, 2, 1})...)); err != nil {
		t.Fatal(err)
	}
	// The new pod echoes what it got: the opening again, then the next
	// message, whole.
	for _, want := range []string{`{"event":"connected"}`, ""} {
		got := readEcho(t, m)
		if want != "" && got != want {
			t.Fatalf("echo %q, want %q", got, want)
		}
	}
	if got := readEcho(t, m); got != next {
		t.Fatalf("after the opening the new pod echoed %q, want %q", got, next)
	}
}

// A pod that dies inside a message toward the client cannot be followed
// by another pod's messages: the call ends, the client reads exactly the
// dead pod's bytes and the end of the stream, and the move is counted as
// torn.
func TestTornMessageEndsTheCall(t *testing.T) {
	e := newEnv(t, envOpt{cfg: resumeCfg, opening: twilioOpening})
	mortal := newMortalPod(t)
	e.addPod("pod-x", "gold", mortal.addr())
	callID, url := e.twilioCallOn("pod-x")
	m := dialMedia(t, e, nil, "plain", url, nil)
	if _, err := m.Write(rawOpening(callID)); err != nil {
		t.Fatal(err)
	}
	readEcho(t, m)
	readEcho(t, m)
	mortal.kill("tear")
	torn := frame(true, 1, bytes.Repeat([]byte("x"), 100), nil)[:12]
	if got := m.drain(); !bytes.Equal(got, torn) {
		t.Errorf("client read % x after the opening, want the torn bytes % x and the end", got, torn)
	}
	e.waitSockets(0)
	if got := value(e.px.metrics.resumptions.WithLabelValues("torn")); got != 1 {
		t.Errorf("torn = %v, want 1", got)
	}
	if tl, _ := e.alloc.Timeline(context.Background(), callID); tl.SocketEnd != "pod_lost" || tl.Resumptions != 0 {
		t.Errorf("timeline = %+v; want pod_lost without a resumption", tl)
	}
}

// heldLeases holds ResumeCall until the test lets it go.
type heldLeases struct {
	Leases
	entered, release chan struct{}
}

func (h heldLeases) ResumeCall(ctx context.Context, callID, pod, holder string, ej mediacontract.Ejection, blame bool) (string, bool, error) {
	close(h.entered)
	<-h.release
	return h.Leases.ResumeCall(ctx, callID, pod, holder, ej, blame)
}

// A stop that comes while the call moves (a drain's deadline) is kept:
// the move completes and the socket then ends with the stop's code, to
// the client and to the new pod alike, never left open nor blamed on a
// pod.
func TestStopDuringAMoveIsDelivered(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		h := heldLeases{entered: make(chan struct{}), release: make(chan struct{})}
		e := newEnv(t, envOpt{
			relay: relay,
			// No idle deadline, whose arming would deliver the stop by itself.
			cfg:     func(c *Config) { resumeCfg(c); c.DrainTimeout = 50 * time.Millisecond; c.IdleTimeout = 0 },
			opening: twilioOpening,
			leases:  func(l Leases) Leases { h.Leases = l; return h },
		})
		mortal := newMortalPod(t)
		e.addPod("pod-x", "gold", mortal.addr())
		callID, url := e.twilioCallOn("pod-x")
		// The call's next pod says nothing, and the client goes quiet: no
		// message of either may be what delivers the stop.
		quiet := newMortalPod(t)
		quiet.quiet = true
		e.addPod("pod-q", "gold", quiet.addr())
		for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
			if _, err := e.alloc.Drain(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
		}
		s := openStream(t, e, url, callID, 5*time.Millisecond, 4)
		s.waitEchoes(5)
		s.pause()
		mortal.kill("reset")
		<-h.entered
		e.cancel() // shutdown: after the drain timeout, every open socket is stopped with 1001
		testwait.Until(t, 5*time.Second, "the stop recorded", func() bool {
			open, _ := e.px.snapshot()
			return len(open) == 1 && open[0].Stopped()
		})
		close(h.release)
		testwait.Until(t, 10*time.Second, "the provider's socket ended", func() bool {
			_, ended := s.snapshot()
			return ended != nil
		})
		if _, ended := s.snapshot(); websocket.CloseStatus(ended) != closeGoingAway {
			t.Errorf("the provider read %v, want close %d", ended, closeGoingAway)
		}
		e.waitSockets(0)
		if got := quiet.served(); len(got) != 1 || got[0].header.Get(ResumedHeader) != "1" || got[0].closeCode != closeGoingAway {
			t.Errorf("the new pod served %+v; want one resumed socket closed with %d", got, closeGoingAway)
		}
		if tl, _ := e.alloc.Timeline(context.Background(), callID); tl.SocketEnd != "drain" || tl.Resumptions != 1 {
			t.Errorf("timeline = %+v; want ended by the drain after one resumption", tl)
		}
	})
}

// A hundred pod deaths under ten calls streaming as Twilio does (a 20 ms
// frame each), ten deaths each, alternately resets and FINs: every call
// moves every time, no provider socket closes, every echo after a gap
// comes in order, and each new pod is told its count and given the
// opening. The gaps the providers heard are logged, for
// docs/media.md: the test judges what the providers and pods saw, not
// how fast.
func TestAHundredPodDeaths(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		// A call never goes back to a pod it left: each needs a free pod it
		// has not been on at every death (pods > calls + deaths).
		const calls, deaths, pods = 10, 10, 21
		e := newEnv(t, envOpt{relay: relay, opening: twilioOpening, cfg: func(c *Config) {
			resumeCfg(c)
			c.Resume.MaxPerCall = deaths
			c.MaxEjectionPercent = 0 // a dead pod's next socket is a new container's
		}})
		ctx := context.Background()
		for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
			if _, err := e.alloc.Drain(ctx, pod); err != nil {
				t.Fatal(err)
			}
		}
		mortals := map[string]*mortalPod{}
		for i := range pods {
			name := fmt.Sprintf("pod-m%d", i)
			mortals[name] = newMortalPod(t)
			e.addPod(name, "gold", mortals[name].addr())
		}
		type result struct {
			// gaps: between the last echo before a death and the first
			// after; heard: from the death to that first echo.
			gaps, heard []time.Duration
			lost        []int // frames between the last echo before a death and the first after, not echoed
		}
		results := make([]result, calls)
		var wg sync.WaitGroup
		for c := range calls {
			id := fmt.Sprintf("CA%02d", c)
			al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: id, Creator: "provider:twilio"})
			if err != nil {
				t.Fatal(err)
			}
			s := openStream(t, e, e.url(al.PodName, e.signer.Mint(id, al.PodName, agentPath)), id, 20*time.Millisecond, 160)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for d := range deaths {
					before, _ := s.snapshot()
					s.waitEchoes(len(before) + 5)
					info, err := e.alloc.Call(ctx, id)
					if err != nil {
						t.Error(err)
						return
					}
					// The death's phase in the 20 ms cadence, at random: not
					// a wait for anything, the injection's timing.
					time.Sleep(rand.N(20 * time.Millisecond))
					before, _ = s.snapshot()
					killed := time.Now()
					mortals[info.PodName].kill([]string{"reset", "fin"}[d%2])
					s.waitEchoes(len(before) + 1)
					after, _ := s.snapshot()
					last, next := before[len(before)-1], after[len(before)]
					results[c].gaps = append(results[c].gaps, next.at.Sub(last.at))
					results[c].heard = append(results[c].heard, next.at.Sub(killed))
					results[c].lost = append(results[c].lost, next.seq-last.seq-1)
				}
				echoes, _ := s.snapshot()
				s.waitEchoes(len(echoes) + 5)
				echoes, ended := s.snapshot()
				if ended != nil {
					t.Errorf("%s: the provider's socket ended: %v", id, ended)
				}
				if i := inOrder(echoes); i >= 0 {
					t.Errorf("%s: echo %d out of order: seq %d after %d", id, i, echoes[i].seq, echoes[i-1].seq)
				}
				s.close()
			}()
		}
		wg.Wait()
		e.waitSockets(0)
		if got := value(e.px.metrics.resumptions.WithLabelValues("resumed")); got != calls*deaths {
			t.Errorf("resumed = %v, want %d", got, calls*deaths)
		}
		// Every pod's socket began with the opening; the resumed ones were
		// told their count, one to ten per call.
		counts := map[string]int{}
		for _, m := range mortals {
			for _, ps := range m.served() {
				if len(ps.events) < 2 || ps.events[0] != "connected" || ps.events[1] != "start" {
					t.Errorf("a pod's socket began with %v", ps.events[:min(2, len(ps.events))])
				}
				counts[ps.header.Get(ResumedHeader)]++
			}
		}
		for n := 1; n <= deaths; n++ {
			if counts[fmt.Sprint(n)] != calls {
				t.Errorf("%d sockets were told %s: %d, want %d", counts[fmt.Sprint(n)], ResumedHeader, n, calls)
			}
		}
		var gaps, heard []time.Duration
		var lost []int
		for _, r := range results {
			gaps, heard = append(gaps, r.gaps...), append(heard, r.heard...)
			lost = append(lost, r.lost...)
		}
		slices.Sort(gaps)
		slices.Sort(heard)
		slices.Sort(lost)
		if len(gaps) > 0 {
			q := func(ds []time.Duration, p float64) time.Duration {
				return ds[min(len(ds)-1, int(p*float64(len(ds))))].Round(10 * time.Microsecond)
			}
			t.Logf("%d pod deaths (frames every 20ms): gap in echoed media p50 %v, p99 %v, max %v; death to the next echo p50 %v, p99 %v, max %v; frames not echoed per death: median %d, max %d",
				len(gaps), q(gaps, .5), q(gaps, .99), q(gaps, 1), q(heard, .5), q(heard, .99), q(heard, 1), lost[len(lost)/2], lost[len(lost)-1])
		}
	})
}

// A pod removed from the registry while its call streams (deleted from
// Kubernetes, dropped from the static list) leaves a call that opted in to
// its socket: at the next renewal the call moves to another pod, the
// provider's socket stays open, and the removed pod is neither blamed nor
// written back. Without the opt-in the call ends as before (1008).
func TestPodLeftTheRegistryMidCall(t *testing.T) {
	eachRelay(t, func(t *testing.T, relay Relay) {
		for _, resume := range []bool{true, false} {
			t.Run(fmt.Sprint("resume=", resume), func(t *testing.T) {
				cfg := resumeCfg
				if !resume {
					cfg = failoverCfg
				}
				e := newEnv(t, envOpt{cfg: cfg, opening: twilioOpening, leaseTTL: 2 * time.Second, relay: relay})
				rec := fakeagent.NewRecorder()
				for name, ag := range e.agents {
					ag.Record(rec, name)
				}
				left := newMortalPod(t)
				e.addPod("pod-x", "gold", left.addr())
				callID, url := e.twilioCallOn("pod-x")
				s := openStream(t, e, url, callID, 5*time.Millisecond, 4)
				s.waitEchoes(10)
				ctx := context.Background()
				out, err := e.alloc.UnregisterPod(ctx, "", "pod-x")
				if err != nil {
					t.Fatal(err)
				}
				if !resume {
					if out.CallsEnded != 1 {
						t.Errorf("unregister = %+v; want the call ended", out)
					}
					testwait.Until(t, 10*time.Second, "the provider's socket ended", func() bool {
						_, ended := s.snapshot()
						return ended != nil
					})
					if _, ended := s.snapshot(); websocket.CloseStatus(ended) != closePolicy {
						t.Errorf("the provider read %v, want close %d", ended, closePolicy)
					}
					return
				}
				if out.CallsMoving != 1 || out.CallsEnded != 0 {
					t.Fatalf("unregister = %+v; want the call left to its socket", out)
				}
				e.waitResumed(1)
				before, _ := s.snapshot()
				s.waitEchoes(len(before) + 10)
				echoes, ended := s.snapshot()
				if ended != nil {
					t.Fatalf("the provider's socket ended: %v", ended)
				}
				if i := inOrder(echoes); i >= 0 {
					t.Errorf("echo %d out of order", i)
				}
				tl, _ := e.alloc.Timeline(ctx, callID)
				if tl.Resumptions != 1 || !slices.Equal(tl.MovedFrom, []string{"pod-x"}) {
					t.Errorf("timeline = %+v", tl)
				}
				var took int
				for _, ss := range rec.Sessions() {
					if ss.CallID == callID && ss.Frames > 0 {
						took++
					}
				}
				if took != 1 {
					t.Errorf("%d other pods serve the call, want 1", took)
				}
				s.close()
				e.waitSockets(0)
				if pi, err := e.alloc.PodInfo(ctx, "pod-x"); err == nil {
					t.Errorf("the removed pod is back: %+v", pi)
				}
				if got := value(e.px.metrics.ejections.WithLabelValues("lost")); got != 0 {
					t.Errorf("the removed pod was ejected (%v)", got)
				}
				// It still served: it heard the socket go away.
				if got := left.served(); len(got) != 1 || got[0].closeCode != closeGoingAway {
					t.Errorf("the removed pod served %+v; want one socket closed with %d", got, closeGoingAway)
				}
			})
		}
	})
}

// Where the next pod cannot take the call, it ends as without
// proxy.resume (1014), and the outcome says why: a call at
// proxy.resume.max_per_call, a next pod that cannot be reached, or one
// whose 101 chooses what the provider never agreed to.
func TestMoveThatCannotBeMade(t *testing.T) {
	for _, tc := range []struct {
		outcome string
		// next starts the only other pod and returns its address; kill,
		// when set, kills it after the call moved there.
		next func(t *testing.T) (addr string, kill func())
	}{
		{outcome: "limit", next: func(t *testing.T) (string, func()) {
			p := newMortalPod(t)
			return p.addr(), func() { p.kill("reset") }
		}},
		{outcome: "dial_failed", next: func(t *testing.T) (string, func()) { return brokenPod(t, "closed"), nil }},
		{outcome: "refused", next: func(t *testing.T) (string, func()) {
			p := newMortalPod(t)
			p.refuse = http.StatusBadRequest
			return p.addr(), nil
		}},
	} {
		t.Run(tc.outcome, func(t *testing.T) {
			e := newEnv(t, envOpt{opening: twilioOpening, cfg: func(c *Config) { resumeCfg(c); c.Resume.MaxPerCall = 1 }})
			ctx := context.Background()
			for _, pod := range []string{"pod-a", "pod-b", "pod-s"} {
				if _, err := e.alloc.Drain(ctx, pod); err != nil {
					t.Fatal(err)
				}
			}
			first := newMortalPod(t)
			e.addPod("pod-x", "gold", first.addr())
			callID, url := e.twilioCallOn("pod-x")
			addr, kill := tc.next(t)
			e.addPod("pod-y", "gold", addr)
			s := openStream(t, e, url, callID, 5*time.Millisecond, 4)
			s.waitEchoes(5)
			first.kill("reset")
			if kill != nil {
				e.waitResumed(1)
				before, _ := s.snapshot()
				s.waitEchoes(len(before) + 5)
				kill()
			}
			testwait.Until(t, 10*time.Second, "the provider's socket ended", func() bool {
				_, ended := s.snapshot()
				return ended != nil
			})
			if _, ended := s.snapshot(); websocket.CloseStatus(ended) != closeBadGateway {
				t.Errorf("the provider read %v, want close %d", ended, closeBadGateway)
			}
			e.waitSockets(0)
			if got := value(e.px.metrics.resumptions.WithLabelValues(tc.outcome)); got != 1 {
				t.Errorf("%s = %v, want 1", tc.outcome, got)
			}
			if tl, _ := e.alloc.Timeline(ctx, callID); tl.State != "ended" || tl.SocketEnd != "pod_lost" {
				t.Errorf("timeline = %+v; want ended as pod_lost", tl)
			}
		})
	}
}

// A pod name whose instance was replaced while a call streamed on the old
// one (a StatefulSet's replacement, registered before the old container
// is killed) is not blamed for the old one's death: the replacement is
// not ejected, whether the call moves or ends.
func TestOldInstancesDeathSparesItsReplacement(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run(fmt.Sprint("resume=", resume), func(t *testing.T) {
			cfg := resumeCfg
			if !resume {
				cfg = failoverCfg
			}
			e := newEnv(t, envOpt{cfg: cfg, opening: twilioOpening})
			old := newMortalPod(t)
			e.addPod("pod-x", "gold", old.addr())
			callID, url := e.twilioCallOn("pod-x")
			s := openStream(t, e, url, callID, 5*time.Millisecond, 4)
			s.waitEchoes(5)
			replacement := newMortalPod(t)
			e.addPod("pod-x", "gold", replacement.addr())
			old.kill("reset")
			if resume {
				e.waitResumed(1)
			} else {
				testwait.Until(t, 10*time.Second, "the provider's socket ended", func() bool {
					_, ended := s.snapshot()
					return ended != nil
				})
			}
			s.pause()
			e.waitSockets(map[bool]int{true: 1, false: 0}[resume])
			pi, err := e.alloc.PodInfo(context.Background(), "pod-x")
			if err != nil || pi.Ejection != nil {
				t.Errorf("the replacement = %+v (ejection %+v), %v; want it in allocation", pi, pi.Ejection, err)
			}
			if got := value(e.px.metrics.ejections.WithLabelValues("lost")); got != 0 {
				t.Errorf("ejections{lost} = %v, want 0", got)
			}
		})
	}
}
