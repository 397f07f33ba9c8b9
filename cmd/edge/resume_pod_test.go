package main

import (
	"context"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// e2eMortalPod is a voice agent that echoes the caller's audio (every
// media message, nothing else: a voice agent says nothing back to the
// stream's opening, so the provider hears only media) and can die as
// a killed pod does: its open connections reset (RST, no close frame)
// while it keeps listening, as a restarted container would. It keeps
// what each socket it served carried, byte for byte, so that a test can
// hold edge's replay against what the provider sent.
type e2eMortalPod struct {
	ln  net.Listener
	srv *http.Server

	mu      sync.Mutex
	sockets []*e2ePodSocket
	// changed is closed and replaced whenever a socket opens, reads a
	// message or ends, so that waiting on the pod needs no polling.
	changed chan struct{}
}

// e2ePodSocket is one socket an e2eMortalPod served.
type e2ePodSocket struct {
	conn   net.Conn
	header http.Header
	msgs   [][]byte // every data message read, in order
	ended  bool
	// closeCode is the close status read from edge (-1: the connection
	// ended without a close frame, or the pod killed it).
	closeCode websocket.StatusCode
}

type e2eConnKey struct{}

func newE2EMortalPod(t *testing.T) *e2eMortalPod {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &e2eMortalPod{ln: ln, changed: make(chan struct{})}
	// The accepted connection rides in the request's context: the
	// WebSocket hijacks it, and kill needs it to send the reset.
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, e2eConnKey{}, c) }}
	go p.srv.Serve(ln)
	t.Cleanup(func() {
		p.srv.Close()
		p.kill("reset")
	})
	return p
}

func (p *e2eMortalPod) addr() string { return p.ln.Addr().String() }

func (p *e2eMortalPod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	conn, _ := r.Context().Value(e2eConnKey{}).(net.Conn)
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	s := &e2ePodSocket{conn: conn, header: r.Header.Clone()}
	p.update(func() { p.sockets = append(p.sockets, s) })
	c.SetReadLimit(1 << 20)
	for {
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			p.update(func() { s.ended, s.closeCode = true, websocket.CloseStatus(err) })
			c.CloseNow()
			return
		}
		p.update(func() { s.msgs = append(s.msgs, msg) })
		if _, media := mediaSeq(msg); !media {
			continue
		}
		if err := c.Write(r.Context(), typ, msg); err != nil {
			p.update(func() { s.ended, s.closeCode = true, -1 })
			return
		}
	}
}

func (p *e2eMortalPod) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
	close(p.changed)
	p.changed = make(chan struct{})
}

// kill ends every open connection of the pod as its process's death
// does: "reset" (RST) or "fin" (the stream ends without a close frame).
func (p *e2eMortalPod) kill(how string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sockets {
		if tc, ok := s.conn.(*net.TCPConn); ok && !s.ended {
			if how == "reset" {
				tc.SetLinger(0)
			}
			tc.Close()
		}
	}
}

// served is a copy of what each socket carried so far.
func (p *e2eMortalPod) served() []e2ePodSocket {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]e2ePodSocket, len(p.sockets))
	for i, s := range p.sockets {
		out[i] = e2ePodSocket{header: s.header, msgs: slices.Clone(s.msgs), ended: s.ended, closeCode: s.closeCode}
	}
	return out
}

// await waits until cond holds of what the pod served, re-checked at each
// change, for up to 10 s.
func (p *e2eMortalPod) await(t *testing.T, what string, cond func([]e2ePodSocket) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if cond(p.served()) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("timed out waiting for %s; the pod served %d sockets", what, len(p.served()))
		}
	}
}
