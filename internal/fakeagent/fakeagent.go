// Package fakeagent is a stand-in voice agent: a WebSocket server on loopback
// that echoes every message back on any path. edge's embedded default runs a
// few as static pods, and tests and benchmarks use them as pods.
package fakeagent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Agent is one fake voice agent.
type Agent struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger

	// Sockets counts media sockets accepted; Paths records their request
	// paths (with query), for tests to check what the proxy sent.
	Sockets atomic.Int64
	mu      sync.Mutex
	paths   []string
	headers []http.Header
	live    map[*websocket.Conn]struct{} // open sockets, for Kill
	closes  []websocket.StatusCode
	rec     *Recorder // nil: sockets are not recorded (Record)
	pod     string    // the name rec knows this agent by
}

// Listen opens the agent's listener on addr ("127.0.0.1:0" for any port).
func Listen(addr string, log *slog.Logger) (*Agent, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{ln: ln, log: log}
	a.srv = &http.Server{Handler: a, ReadHeaderTimeout: 5 * time.Second}
	return a, nil
}

// Addr is the agent's host:port.
func (a *Agent) Addr() string { return a.ln.Addr().String() }

// Paths returns the request paths of the sockets accepted so far.
func (a *Agent) Paths() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.paths...)
}

// Headers returns the request headers of the sockets accepted so far.
func (a *Agent) Headers() []http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]http.Header(nil), a.headers...)
}

// Run serves until ctx ends, then closes the listener and open sockets.
func (a *Agent) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- a.srv.Serve(a.ln) }()
	select {
	case <-ctx.Done():
		a.srv.Close()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Close stops the agent at once.
func (a *Agent) Close() error { return a.srv.Close() }

// Kill stops the agent as a crashed pod would: the listener and every open
// socket close at once, with no close frame (Close leaves accepted
// WebSockets running: they are hijacked from the HTTP server).
func (a *Agent) Kill() {
	a.srv.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	for c := range a.live {
		c.CloseNow()
	}
}

// CloseCodes returns the close status each ended socket read from its
// client (-1: the connection ended without a close frame).
func (a *Agent) CloseCodes() []websocket.StatusCode {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]websocket.StatusCode(nil), a.closes...)
}

// ServeHTTP accepts a WebSocket on any path and echoes until it closes.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:    requestedSubprotocols(r),
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return
	}
	a.Sockets.Add(1)
	a.mu.Lock()
	a.paths = append(a.paths, r.URL.RequestURI())
	a.headers = append(a.headers, r.Header.Clone())
	if a.live == nil {
		a.live = map[*websocket.Conn]struct{}{}
	}
	a.live[c] = struct{}{}
	rec, pod := a.rec, a.pod
	a.mu.Unlock()
	// ended tells the recorder the socket is over, once, before any close
	// handshake that could wait on edge: the pod has stopped serving.
	ended := func(websocket.StatusCode) {}
	var session *Session
	if rec != nil {
		session = rec.open(pod)
		var once sync.Once
		ended = func(code websocket.StatusCode) { once.Do(func() { rec.close(session, code) }) }
		defer ended(-1)
	}
	defer func() {
		a.mu.Lock()
		delete(a.live, c)
		a.mu.Unlock()
	}()
	c.SetReadLimit(1 << 20)
	ctx := r.Context()
	speaking := false
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			status := websocket.CloseStatus(err)
			a.mu.Lock()
			a.closes = append(a.closes, status)
			a.mu.Unlock()
			ended(status)
			if status == -1 {
				status = websocket.StatusNormalClosure
			}
			c.Close(status, "")
			return
		}
		if session != nil && typ == websocket.MessageText {
			rec.frame(session, msg)
		}
		if speaking {
			continue // reads on, echoes nothing
		}
		if n, ok := speakCommand(msg); ok {
			speaking = true
			go speak(ctx, c, n)
			continue
		}
		if code, ok := closeCommand(msg); ok {
			ended(-1)
			if code == 0 {
				c.CloseNow() // a crash: TCP closed without a close frame
			} else {
				c.Close(code, "agent hung up")
			}
			return
		}
		if err := c.Write(ctx, typ, msg); err != nil {
			return
		}
	}
}

// CloseMessage is a text message after which the agent ends the socket
// instead of echoing: "fakeagent:close <code>" closes with that code,
// "fakeagent:close 0" drops the TCP connection without a close frame.
// Tests use it to make the pod the side that hangs up.
const CloseMessage = "fakeagent:close "

// SpeakMessage is a text message after which the agent sends "<n>"
// binary messages of 32 KiB on its own, as a voice agent talks, and from
// then on reads what comes without echoing it. Tests use it for a pod that
// keeps reading while its writes wait on a client that does not read.
const SpeakMessage = "fakeagent:speak "

func speakCommand(msg []byte) (int, bool) {
	rest, ok := strings.CutPrefix(string(msg), SpeakMessage)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n > 0
}

func speak(ctx context.Context, c *websocket.Conn, n int) {
	msg := make([]byte, 32<<10)
	for range n {
		if err := c.Write(ctx, websocket.MessageBinary, msg); err != nil {
			return
		}
	}
}

func closeCommand(msg []byte) (websocket.StatusCode, bool) {
	rest, ok := strings.CutPrefix(string(msg), CloseMessage)
	if !ok {
		return 0, false
	}
	code, err := strconv.Atoi(rest)
	if err != nil {
		return 0, false
	}
	return websocket.StatusCode(code), true
}

// requestedSubprotocols echoes the client's offer, so any subprotocol the
// proxy forwards is accepted.
func requestedSubprotocols(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
