// Package relaytest is the kit every relay is tested with: a recording
// Host (which moves a socket as the test says), a socket over real
// loopback TCP with the test holding the provider's and the pod's ends
// (the provider's over TLS 1.3 too), scripted peers that write and read
// frames, and Conformance, the scenarios each relay (the goroutine pump,
// the epoll and the io_uring loops) must pass alike, each with a plain
// and a TLS provider. The relay packages' own tests run it; package
// proxy's tests run the relays through the whole proxy (eachRelay).
package relaytest

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/internal/testpki"
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/tls13"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// Host records what a relay tells its host: the pods it lost, the moves it
// asked for and each socket's end. It moves a socket only as the test says
// (OnResume); otherwise Resume fails.
type Host struct {
	mu    sync.Mutex
	lost  []error
	moves []relay.Move
	mover func(*relay.Socket, relay.Move) (relay.Moved, error)
	ended chan Ended
}

// Ended is a socket's end as its relay reported it.
type Ended struct {
	Result relay.Result
	Counts relay.Counts
}

// NewHost is a Host for up to 64 sockets' ends.
func NewHost() *Host { return &Host{ended: make(chan Ended, 64)} }

// Ended implements relay.Host.
func (h *Host) Ended(s *relay.Socket, c relay.Counts) { h.ended <- Ended{s.Result(), c} }

// PodLost implements relay.Host.
func (h *Host) PodLost(_ *relay.Socket, cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lost = append(h.lost, cause)
}

// Resume implements relay.Host: it records the move and makes it as
// OnResume says, or fails.
func (h *Host) Resume(s *relay.Socket, m relay.Move) (relay.Moved, error) {
	h.mu.Lock()
	m.Opening = append([]byte(nil), m.Opening...)
	h.moves = append(h.moves, m)
	f := h.mover
	h.mu.Unlock()
	if f == nil {
		return relay.Moved{}, errors.New("relaytest: the host moves no socket")
	}
	return f(s, m)
}

// OnResume sets how the host moves a socket (nil: it does not).
func (h *Host) OnResume(f func(*relay.Socket, relay.Move) (relay.Moved, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mover = f
}

// MoveTo makes the host move each socket to the next pod of pods: the
// relay's end of a pair from NewPod, with the stream's opening replayed
// to it (as the proxy does), early its bytes behind a 101 and notice what
// the provider is told first.
func (h *Host) MoveTo(pods chan net.Conn, early, notice []byte) {
	h.OnResume(func(_ *relay.Socket, m relay.Move) (relay.Moved, error) {
		c := <-pods
		if _, err := c.Write(m.Opening); err != nil {
			return relay.Moved{}, err
		}
		return relay.Moved{Pod: c, Early: early, Notice: notice}, nil
	})
}

// Moves are the moves the relay asked for so far.
func (h *Host) Moves() []relay.Move {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]relay.Move(nil), h.moves...)
}

// Lost is the causes of the pods lost so far.
func (h *Host) Lost() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.lost...)
}

// WaitEnded waits for the next socket's end.
func (h *Host) WaitEnded(t testing.TB) Ended {
	t.Helper()
	select {
	case e := <-h.ended:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not end the socket")
		return Ended{}
	}
}

// Env is a relay environment for h with lim, fresh unregistered counters
// and a discarded log.
func Env(h *Host, lim relay.Limits) relay.Env {
	c := func() relay.Counters {
		return relay.Counters{Bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "b"}),
			Messages: prometheus.NewCounter(prometheus.CounterOpts{Name: "m"})}
	}
	return relay.Env{Host: h, Limits: func() relay.Limits { return lim }, Dirs: [2]relay.Counters{c(), c()},
		Log: slog.New(slog.DiscardHandler)}
}

// Peer is the test's end of one side: the provider (Client) or the pod.
type Peer struct {
	Conn net.Conn
	r    *bufio.Reader
	mask bool // the provider masks its frames, as a client must
}

// Socket is a relayed socket over loopback TCP: Socket holds the relay's
// ends, Client and Pod the test's. TLS, for a provider that speaks TLS
// 1.3 to edge, is the relay's end of it (Socket.Client too), served by
// package tls13's listener so that a loop may take its records over.
type Socket struct {
	Socket      *relay.Socket
	Client, Pod *Peer
	TLS         *tls.Conn
}

// NewSocket connects two loopback TCP pairs and returns the socket a relay
// is handed and the test's ends; they are closed when the test ends.
func NewSocket(t testing.TB) *Socket {
	t.Helper()
	rc, tc := pair(t)
	rp, tp := pair(t)
	s := &relay.Socket{CallID: "CA-relaytest", Client: rc, Started: time.Now()}
	s.SetPod(rp)
	return &Socket{Socket: s, Client: &Peer{Conn: tc, r: bufio.NewReader(tc), mask: true}, Pod: &Peer{Conn: tp, r: bufio.NewReader(tp)}}
}

// What stands for the upgrade's exchange over TLS (NewTLSSocket).
const (
	upgrade  = "GET /media HTTP/1.1\r\n\r\n"
	switched = "HTTP/1.1 101 Switching Protocols\r\n\r\n"
)

// NewTLSSocket is NewSocket with a provider that speaks TLS 1.3 to edge,
// past its upgrade.
func NewTLSSocket(t testing.TB) *Socket {
	t.Helper()
	ca := testpki.NewCA(t)
	p := ca.Valid(t, "127.0.0.1")
	cert, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls13.Listener(inner, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	defer ln.Close()
	accepted := make(chan *tls.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		// The upgrade's request and its 101, as application records
		// each way (the loops take over a socket's records only past
		// one each way).
		tc := c.(*tls.Conn)
		var b [len(upgrade)]byte
		if _, err := io.ReadFull(tc, b[:]); err != nil || string(b[:]) != upgrade {
			tc.Close()
			tc = nil
		} else if _, err := tc.Write([]byte(switched)); err != nil {
			tc.Close()
			tc = nil
		}
		accepted <- tc
	}()
	tc, err := tls.Dial("tcp", inner.Addr().String(), ca.ClientConfig("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Write([]byte(upgrade)); err != nil {
		t.Fatal(err)
	}
	var b [len(switched)]byte
	if _, err := io.ReadFull(tc, b[:]); err != nil || string(b[:]) != switched {
		t.Fatalf("the upgrade over TLS: %q, %v", b, err)
	}
	rc := <-accepted
	if rc == nil {
		t.Fatal("the upgrade over TLS failed")
	}
	t.Cleanup(func() { rc.Close(); tc.Close() })
	rp, tp := pair(t)
	s := &relay.Socket{CallID: "CA-relaytest", Client: rc, Started: time.Now()}
	s.SetPod(rp)
	return &Socket{Socket: s, TLS: rc, Client: &Peer{Conn: tc, r: bufio.NewReader(tc), mask: true}, Pod: &Peer{Conn: tp, r: bufio.NewReader(tp)}}
}

// NewPod connects another pod over loopback TCP, for a move: the relay's
// end and the test's.
func NewPod(t testing.TB) (relayEnd net.Conn, pod *Peer) {
	t.Helper()
	rp, tp := pair(t)
	return rp, &Peer{Conn: tp, r: bufio.NewReader(tp)}
}

// pair is a loopback TCP connection's two ends, closed when the test ends.
func pair(t testing.TB) (relayEnd, testEnd net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	testEnd, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	relayEnd = <-accepted
	if relayEnd == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { relayEnd.Close(); testEnd.Close() })
	return relayEnd, testEnd
}

// Reset ends the peer's connection with a TCP reset, as a killed process's
// kernel does when bytes are unread.
func (p *Peer) Reset() {
	p.Conn.(*net.TCPConn).SetLinger(0)
	p.Conn.Close()
}

// ClientLeaves ends the test as a provider that hangs up without a word:
// its connection closes, the pod reads what edge still sends it (its
// close frame) to the end, then the pod's connection closes too. Only the
// client's end came first, so the pod is not to blame.
func (s *Socket) ClientLeaves() {
	s.Client.Conn.Close()
	for {
		if _, err := s.Pod.Read(5 * time.Second); err != nil {
			break
		}
	}
	s.Pod.Conn.Close()
}

// Write sends one frame, masked from the provider.
func (p *Peer) Write(t testing.TB, fin bool, op byte, payload []byte) {
	t.Helper()
	var mask *[4]byte
	if p.mask {
		mask = &[4]byte{7, 1, 3, 9}
	}
	p.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := p.Conn.Write(wsproto.Frame(fin, op, payload, mask)); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// Frame is one frame a peer read, its payload unmasked.
type Frame struct {
	Fin     bool
	Op      byte
	Payload []byte
}

// Close is the code and reason of a close frame.
func (f Frame) Close() (int, string) {
	if f.Op != 0x8 || len(f.Payload) < 2 {
		return 0, ""
	}
	return int(binary.BigEndian.Uint16(f.Payload)), string(f.Payload[2:])
}

// Read reads the next frame within d (io.EOF and the like when the
// relay ended the stream).
func (p *Peer) Read(d time.Duration) (Frame, error) {
	p.Conn.SetReadDeadline(time.Now().Add(d))
	return ReadFrame(p.r)
}

// ReadFrame reads one frame from r and unmasks its payload (at most 1 MiB).
func ReadFrame(r *bufio.Reader) (Frame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Frame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Frame{}, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	var mask [4]byte
	if h[1]&0x80 != 0 {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return Frame{}, err
		}
	}
	if n > 1<<20 {
		return Frame{}, errors.New("relaytest: frame over 1 MiB")
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return Frame{}, err
	}
	if h[1]&0x80 != 0 {
		for i := range payload {
			payload[i] ^= mask[i%4]
		}
	}
	return Frame{Fin: h[0]&0x80 != 0, Op: h[0] & 0x0f, Payload: payload}, nil
}

// MustRead reads the next frame and fails the test without one.
func (p *Peer) MustRead(t testing.TB) Frame {
	t.Helper()
	f, err := p.Read(5 * time.Second)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return f
}
