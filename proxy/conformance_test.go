package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	gorilla "github.com/gorilla/websocket"

	"github.com/edge-voice/edge/internal/testwait"
)

// WebSocket conformance through the hop: two independent
// implementations, coder/websocket and gorilla/websocket, one as provider
// and one as pod, through edge, on both relays: a provider's declared
// subprotocol end to end and its compression offer stopped at edge,
// fragmented messages with a ping between fragments, close codes and
// reasons both ways, and the size
// limit as a 1009 to both peers. gorilla/websocket is a test-only
// dependency, the second implementation the issue asks for.

const confProtocol = "audio.v1"

// confPod records what a pod saw: the close code and reason its client
// sent.
type confPod struct {
	mu     sync.Mutex
	closes []string // "code reason"
}

func (p *confPod) closed(code int, reason string) {
	p.mu.Lock()
	p.closes = append(p.closes, fmt.Sprintf("%d %s", code, reason))
	p.mu.Unlock()
}

func (p *confPod) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.closes) == 0 {
		return ""
	}
	return p.closes[len(p.closes)-1]
}

// closeCommand: a text "close:<code>:<reason>" makes the pod close.
func closeCommand(msg []byte) (int, string, bool) {
	rest, ok := strings.CutPrefix(string(msg), "close:")
	if !ok {
		return 0, "", false
	}
	c, reason, _ := strings.Cut(rest, ":")
	code, err := strconv.Atoi(c)
	return code, reason, err == nil
}

// coderPod is an echoing pod on coder/websocket.
func coderPod(rec *confPod) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{confProtocol},
			CompressionMode: websocket.CompressionNoContextTakeover})
		if err != nil {
			return
		}
		c.SetReadLimit(8 << 20)
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) {
					rec.closed(int(ce.Code), ce.Reason)
				} else {
					rec.closed(-1, err.Error())
				}
				return
			}
			if code, reason, ok := closeCommand(msg); ok {
				c.Close(websocket.StatusCode(code), reason)
				return
			}
			if err := c.Write(r.Context(), typ, msg); err != nil {
				return
			}
		}
	})
}

// gorillaPod is an echoing pod on gorilla/websocket, writing in small
// frames (fragmented messages toward the client).
func gorillaPod(rec *confPod) http.Handler {
	up := gorilla.Upgrader{EnableCompression: true, Subprotocols: []string{confProtocol}, WriteBufferSize: 512,
		CheckOrigin: func(*http.Request) bool { return true }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		c.SetReadLimit(8 << 20)
		for {
			typ, msg, err := c.ReadMessage()
			if err != nil {
				var ce *gorilla.CloseError
				if errors.As(err, &ce) {
					rec.closed(ce.Code, ce.Text)
				} else {
					rec.closed(-1, err.Error())
				}
				return
			}
			if code, reason, ok := closeCommand(msg); ok {
				c.WriteControl(gorilla.CloseMessage, gorilla.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
				c.SetReadDeadline(time.Now().Add(2 * time.Second))
				c.ReadMessage() // the client's close reply
				return
			}
			if err := c.WriteMessage(typ, msg); err != nil {
				return
			}
		}
	})
}

// confClient is a provider on one implementation.
type confClient interface {
	write(binary bool, b []byte) error
	// writeFragments sends parts as one binary message in several frames,
	// with a ping between the first fragments where the library allows.
	writeFragments(parts [][]byte) error
	read() ([]byte, error) // closeErr on a close
	close(code int, reason string)
	negotiated() (subprotocol, extensions string)
	pongs() int64
}

type closeErr struct {
	code   int
	reason string
}

func (e closeErr) Error() string { return fmt.Sprintf("close %d %q", e.code, e.reason) }

type gorillaClient struct {
	c    *gorilla.Conn
	ext  string
	pong atomic.Int64
}

func dialGorilla(url string, compress bool, tc *tls.Config) (confClient, error) {
	d := gorilla.Dialer{EnableCompression: compress, Subprotocols: []string{confProtocol}, WriteBufferSize: 512, HandshakeTimeout: 5 * time.Second, TLSClientConfig: tc}
	if !compress {
		d.WriteBufferSize = 4 << 20
	}
	c, resp, err := d.Dial(url, nil)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(8 << 20)
	g := &gorillaClient{c: c, ext: resp.Header.Get("Sec-WebSocket-Extensions")}
	c.SetPongHandler(func(string) error { g.pong.Add(1); return nil })
	return g, nil
}

func (g *gorillaClient) write(binary bool, b []byte) error {
	typ := gorilla.TextMessage
	if binary {
		typ = gorilla.BinaryMessage
	}
	return g.c.WriteMessage(typ, b)
}

func (g *gorillaClient) writeFragments(parts [][]byte) error {
	w, err := g.c.NextWriter(gorilla.BinaryMessage)
	if err != nil {
		return err
	}
	for i, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
		if i == 0 {
			// The first fragments are on the wire (the write buffer is
			// 512 bytes): a ping goes between them.
			if err := g.c.WriteControl(gorilla.PingMessage, []byte("mid-message"), time.Now().Add(time.Second)); err != nil {
				return err
			}
		}
	}
	return w.Close()
}

func (g *gorillaClient) read() ([]byte, error) {
	g.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := g.c.ReadMessage()
	var ce *gorilla.CloseError
	if errors.As(err, &ce) {
		return nil, closeErr{ce.Code, ce.Text}
	}
	return b, err
}

func (g *gorillaClient) close(code int, reason string) {
	g.c.WriteControl(gorilla.CloseMessage, gorilla.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	g.c.SetReadDeadline(time.Now().Add(2 * time.Second))
	g.c.ReadMessage()
	g.c.Close()
}

func (g *gorillaClient) negotiated() (string, string) { return g.c.Subprotocol(), g.ext }
func (g *gorillaClient) pongs() int64                 { return g.pong.Load() }

type coderClient struct {
	c   *websocket.Conn
	ext string
}

func dialCoder(url string, compress bool, tc *tls.Config) (confClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mode := websocket.CompressionDisabled
	if compress {
		mode = websocket.CompressionNoContextTakeover
	}
	opts := &websocket.DialOptions{Subprotocols: []string{confProtocol}, CompressionMode: mode}
	if tc != nil {
		opts.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	}
	c, resp, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(8 << 20)
	return &coderClient{c: c, ext: resp.Header.Get("Sec-WebSocket-Extensions")}, nil
}

func (k *coderClient) write(binary bool, b []byte) error {
	typ := websocket.MessageText
	if binary {
		typ = websocket.MessageBinary
	}
	return k.c.Write(context.Background(), typ, b)
}

func (k *coderClient) writeFragments(parts [][]byte) error {
	w, err := k.c.Writer(context.Background(), websocket.MessageBinary)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return w.Close()
}

func (k *coderClient) read() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := k.c.Read(ctx)
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return nil, closeErr{int(ce.Code), ce.Reason}
	}
	return b, err
}

func (k *coderClient) close(code int, reason string) { k.c.Close(websocket.StatusCode(code), reason) }
func (k *coderClient) negotiated() (string, string)  { return k.c.Subprotocol(), k.ext }
func (k *coderClient) pongs() int64                  { return -1 }

// confCall allocates calls until one lands on pod (the other gold pods'
// calls are released at once) and returns its media URL.
func (e *env) confCall(pod string, n *int) string {
	e.t.Helper()
	for range 50 {
		*n++
		id := fmt.Sprintf("CONF%d", *n)
		got, url := e.allocateFor(id, "", "provider:conf")
		if got == pod {
			return url
		}
		if _, err := e.alloc.Release(context.Background(), id); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Fatalf("no call landed on %s", pod)
	return ""
}

func TestWebSocketConformanceThroughTheHop(t *testing.T) {
	pairs := map[string]struct {
		dial func(string, bool, *tls.Config) (confClient, error)
		pod  func(*confPod) http.Handler
	}{
		"gorilla provider, coder pod": {dialGorilla, coderPod},
		"coder provider, gorilla pod": {dialCoder, gorillaPod},
	}
	for name, pair := range pairs {
		t.Run(name, func(t *testing.T) {
			// Both relays, and the epoll relay with edge terminating TLS
			// (its records opened and sealed by the loop).
			variants := []struct {
				relay Relay
				tls   bool
			}{{relayEpoll, false}, {relayGoroutines, false}, {relayEpoll, true}}
			for _, v := range variants {
				label := string(v.relay)
				if v.tls {
					label += "-tls"
				}
				t.Run(label, func(t *testing.T) {
					relay := v.relay
					const limit = 1 << 20
					e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.MaxMessageBytes = limit },
						upgrade: func(string) ClientUpgrade { return ClientUpgrade{Subprotocols: []string{confProtocol}} }})
					var tc *tls.Config
					wrap := func(u string) string { return u }
					if v.tls {
						f := e.serveTLS(t)
						tc, wrap = f.client, func(u string) string { return f.wss(e, u) }
					}
					rec := &confPod{}
					srv := httptest.NewServer(pair.pod(rec))
					t.Cleanup(srv.Close)
					e.addPod("conf-pod", "gold", strings.TrimPrefix(srv.URL, "http://"))
					var n int

					c, err := pair.dial(wrap(e.confCall("conf-pod", &n)), true, tc)
					if err != nil {
						t.Fatal(err)
					}
					// The provider's declared subprotocol goes through; its
					// compression offer stops at edge, which bounds messages
					// by their size on the wire.
					if sp, ext := c.negotiated(); sp != confProtocol || ext != "" {
						t.Errorf("negotiated subprotocol %q, extensions %q; want %s and no extension", sp, ext, confProtocol)
					}
					confEcho(t, c, false, []byte("hello through edge"))
					big := make([]byte, 500<<10)
					rand.Read(big)
					confEcho(t, c, true, big)
					parts := make([][]byte, 3)
					for i := range parts {
						parts[i] = make([]byte, 8<<10)
						rand.Read(parts[i])
					}
					if err := c.writeFragments(parts); err != nil {
						t.Fatal(err)
					}
					if got, err := c.read(); err != nil || !bytes.Equal(got, bytes.Join(parts, nil)) {
						t.Fatalf("fragmented echo: %d bytes, %v", len(got), err)
					}
					if p := c.pongs(); p == 0 {
						t.Error("the ping between fragments got no pong")
					}
					c.close(4001, "agent done")
					testwait.Until(t, 10*time.Second, "the pod's close", func() bool { return rec.last() != "" })
					if got := rec.last(); got != "4001 agent done" {
						t.Errorf("pod saw close %q, want 4001 agent done", got)
					}
					e.waitSockets(0) // the call released, its pod free again

					c, err = pair.dial(wrap(e.confCall("conf-pod", &n)), true, tc)
					if err != nil {
						t.Fatal(err)
					}
					c.write(false, []byte("close:4002:bye now"))
					if _, err := c.read(); !errors.Is(err, closeErr{4002, "bye now"}) {
						t.Errorf("pod's close reached the provider as %v, want close 4002 \"bye now\"", err)
					}
					e.waitSockets(0)

					// One frame over the limit: 1009 to both.
					c, err = pair.dial(wrap(e.confCall("conf-pod", &n)), false, tc)
					if err != nil {
						t.Fatal(err)
					}
					before := len(rec.closes)
					go c.write(true, make([]byte, limit+1))
					// The code, not the reason: a library still writing when
					// the close arrives may report its own reply's.
					if _, err := c.read(); !errors.As(err, new(closeErr)) || err.(closeErr).code != closeTooBig {
						t.Errorf("oversized message: provider got %v, want close 1009", err)
					}
					testwait.Until(t, 10*time.Second, "the pod's close", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.closes) > before })
					if got := rec.last(); !strings.HasPrefix(got, "1009 ") {
						t.Errorf("oversized message: pod saw %q, want 1009", got)
					}
					e.waitSockets(0)
					if v.tls && e.relayedSockets("", "tls") != 3 {
						t.Errorf("TLS sockets on the epoll loops = %d, want 3", e.relayedSockets("", "tls"))
					}
				})
			}
		})
	}
}

func confEcho(t *testing.T, c confClient, binary bool, msg []byte) {
	t.Helper()
	if err := c.write(binary, msg); err != nil {
		t.Fatal(err)
	}
	got, err := c.read()
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(got), err)
	}
}
