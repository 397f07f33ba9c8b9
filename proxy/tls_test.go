package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/testpki"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// tlsFront is the proxy served over TLS as edge's public listener serves
// it: TLSListener on a loopback port, a certificate from a test CA.
type tlsFront struct {
	base   string // wss://127.0.0.1:port
	addr   string
	client *tls.Config // trusts the test CA
	caPEM  []byte
}

func (e *env) serveTLS(t *testing.T) *tlsFront {
	t.Helper()
	ca := testpki.NewCA(t)
	pair := ca.Valid(t, "127.0.0.1")
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{cert}}
	srv := &http.Server{Handler: e.px}
	go srv.Serve(TLSListener(ln, cfg))
	t.Cleanup(func() { srv.Close() })
	return &tlsFront{base: "wss://" + ln.Addr().String(), addr: ln.Addr().String(),
		client: ca.ClientConfig("127.0.0.1"), caPEM: ca.PEM}
}

// wss turns a media URL of e's plain server into one of f.
func (f *tlsFront) wss(e *env, url string) string { return f.base + url[len(e.base()):] }

// dial opens a wss media socket with crypto/tls as the client, its config
// changed by edit (nil: none), and counts the records edge sends.
func (f *tlsFront) dial(t *testing.T, url string, edit func(*tls.Config), rec *recordCounter) *websocket.Conn {
	t.Helper()
	cfg := f.client.Clone()
	if edit != nil {
		edit(cfg)
	}
	tr := &http.Transport{TLSClientConfig: cfg, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil || rec == nil {
			return c, err
		}
		return &countingConn{Conn: c, rec: rec}, nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	c.SetReadLimit(1 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// recordCounter parses the records a client reads and counts those of a
// given length: a KeyUpdate from edge is the only 22-byte record when
// every message is longer than 3 bytes.
type recordCounter struct {
	mu    sync.Mutex
	buf   []byte
	sizes map[int]int
}

func (r *recordCounter) add(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sizes == nil {
		r.sizes = map[int]int{}
	}
	r.buf = append(r.buf, b...)
	for len(r.buf) >= 5 {
		n := int(r.buf[3])<<8 | int(r.buf[4])
		if len(r.buf) < 5+n {
			return
		}
		r.sizes[5+n]++
		r.buf = r.buf[5+n:]
	}
}

func (r *recordCounter) count(size int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sizes[size]
}

type countingConn struct {
	net.Conn
	rec *recordCounter
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.rec.add(b[:n])
	return n, err
}

// A media socket that arrived over TLS 1.3 (edge terminating it, tls.*)
// is relayed by the event loops (epoll, uring) like a plain one, its records opened and
// sealed by the loop (package tls13), beside a plain socket: echoes of
// messages larger than a TLS record both ways, and edge's own close (1008
// on a lost lease) delivered as a close frame, then close_notify.
func TestTLSClientTakesTheLoops(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.RenewInterval = time.Hour }})
		f := e.serveTLS(t)

		_, plainURL := e.allocate("CA-plain", "")
		plain := e.mustDial(plainURL)
		echo(t, plain, "plain")
		e.checkCarried(t, relay, 1)

		_, url := e.allocate("CA-tls", "")
		c := f.dial(t, f.wss(e, url), nil, nil)
		for i := range 20 {
			echo(t, c, strings.Repeat("x", i*100))
		}
		// 40 KiB: several TLS records (16 KiB each) in one message, both ways.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10/16)
		if err := c.Write(ctx, websocket.MessageBinary, big); err != nil {
			t.Fatal(err)
		}
		if _, got, err := c.Read(ctx); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("40 KiB echo over TLS: %d bytes, %v", len(got), err)
		}
		if got := e.relayedSockets("", ""); got != 2 {
			t.Errorf("sockets on the loops = %d, want 2 (plain and TLS)", got)
		}
		if got := e.relayedSockets("", "tls"); got != 1 {
			t.Errorf("TLS sockets on the loops = %d, want 1", got)
		}
		echo(t, plain, "plain still flows")

		if _, err := e.alloc.Release(context.Background(), "CA-tls"); err != nil {
			t.Fatal(err)
		}
		e.px.renewOnce(context.Background())
		if got := readClose(t, c); got != closePolicy {
			t.Errorf("TLS socket's close status = %d, want %d", got, closePolicy)
		}
		e.waitSockets(1)
	})
}

// A TLS 1.2 client keeps crypto/tls: the loops implement TLS 1.3 records
// only, so its socket takes the goroutine relay, and works.
func TestTLS12ClientTakesTheGoroutineRelay(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay})
		f := e.serveTLS(t)
		_, url := e.allocate("CA-12", "")
		c := f.dial(t, f.wss(e, url), func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }, nil)
		for i := range 5 {
			echo(t, c, strings.Repeat("y", 10+i*3000))
		}
		if got := e.relayedSockets("", ""); got != 0 {
			t.Errorf("sockets on the loops = %d, want 0 (TLS 1.2 stays with crypto/tls)", got)
		}
		c.Close(websocket.StatusNormalClosure, "")
		e.waitSockets(0)
	})
}

// Edge updates its own key when one is worn (tls13.RekeyAfter records): a real
// crypto/tls client reads the KeyUpdate and every record after it, which
// is the check that edge's KeyUpdate and its next key are right.
func TestTLSEdgeKeyUpdateReadByCryptoTLS(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		// Restored after the env's own cleanup (cleanups run last
		// first): its loops read it until they stop.
		old := tls13.RekeyAfter
		t.Cleanup(func() { tls13.RekeyAfter = old })
		tls13.RekeyAfter = 3
		e := newEnv(t, envOpt{relay: relay})
		f := e.serveTLS(t)
		_, url := e.allocate("CA-ku", "")
		rec := &recordCounter{}
		c := f.dial(t, f.wss(e, url), nil, rec)
		for i := range 30 {
			echo(t, c, strings.Repeat("z", 10+i*700))
		}
		if got := e.relayedSockets("", "tls"); got != 1 {
			t.Fatalf("TLS sockets on the loops = %d, want 1", got)
		}
		// 30 echoes of one record each, one KeyUpdate per 3 records.
		if got := rec.count(5 + 5 + 1 + tls13.TagLen); got < 9 {
			t.Errorf("KeyUpdate records read by the client = %d, want at least 9", got)
		}
		c.Close(websocket.StatusNormalClosure, "")
		e.waitSockets(0)
	})
}

// A client that offers resumption gets edge's session tickets under the
// application key before the 101 (crypto/tls sends none to a client
// without a session cache); a resumed handshake (PSK) derives the traffic
// secrets the same way. Both sockets still go to the loops.
func TestTLSResumingClientTakesTheLoops(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay})
		f := e.serveTLS(t)
		cache := tls.NewLRUClientSessionCache(4)
		for i := range 2 {
			_, url := e.allocate(fmt.Sprintf("CA-res%d", i), "")
			c := f.dial(t, f.wss(e, url), func(c *tls.Config) { c.ClientSessionCache = cache }, nil)
			echo(t, c, "with tickets")
			c.Close(websocket.StatusNormalClosure, "")
			e.waitSockets(0)
		}
		if got := e.relayedSockets("", "tls"); got != 2 {
			t.Errorf("TLS sockets on the loops = %d, want 2", got)
		}
	})
}

// The loop's idle clock counts a TLS client's records as it counts plain
// bytes: a client that falls silent gets edge's 4000 close, sealed, and its
// call is released.
func TestTLSIdleClientClosed4000(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.IdleTimeout = 300 * time.Millisecond }})
		f := e.serveTLS(t)
		pod, url := e.allocate("CA-idle", "")
		c := f.dial(t, f.wss(e, url), nil, nil)
		echo(t, c, "then silence")
		if got := readClose(t, c); got != closeIdleTimeout {
			t.Errorf("close status = %d, want %d", got, closeIdleTimeout)
		}
		e.waitSockets(0)
		if owner := e.podOwner(pod); owner != "" {
			t.Errorf("pod %s still leased to %q", pod, owner)
		}
		if got := e.relayedSockets("", "tls"); got != 1 {
			t.Errorf("TLS sockets on the loops = %d, want 1", got)
		}
	})
}

// A drain that reaches its deadline closes a TLS socket on the loops with
// 1001, sealed, then close_notify, and Run returns after its release.
func TestTLSDrainDeadlineClosesWith1001(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.DrainTimeout = 200 * time.Millisecond }})
		f := e.serveTLS(t)
		pod, url := e.allocate("CA-drain", "")
		c := f.rawClient(t, e, url)
		c.echo("hi")
		e.cancel()
		var got []byte
		var err error
		for err == nil {
			var b []byte
			b, err = c.read()
			got = append(got, b...)
		}
		// A close frame (0x88, unmasked) carrying 1001, whatever its reason.
		if len(got) < 4 || got[0] != 0x88 || int(got[2])<<8|int(got[3]) != closeGoingAway || err != io.EOF || !c.rec.PeerClosed() {
			t.Errorf("client got % x then %v (close_notify %v), want close 1001 then close_notify", got, err, c.rec.PeerClosed())
		}
		select {
		case <-e.runErr:
			e.runErr <- nil
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after the drain deadline")
		}
		if owner := e.podOwner(pod); owner != "" {
			t.Errorf("pod still leased to %q after the drain closed its socket", owner)
		}
	})
}

// A TLS client that stops reading stalls the pod, which stalls the
// client's own writes, as for a plain one; once it reads again the 128 MiB
// arrive in order. Edge's key wears out every 64 records here, so its
// KeyUpdates go out in the middle of sends that wait on the client.
func TestTLSSlowReaderBackpressure(t *testing.T) {
	eachLoop(t, func(t *testing.T, relay Relay) {
		// Restored after the env's own cleanup (cleanups run last
		// first): its loops read it until they stop.
		old := tls13.RekeyAfter
		t.Cleanup(func() { tls13.RekeyAfter = old })
		tls13.RekeyAfter = 64
		e := newEnv(t, envOpt{relay: relay, cfg: func(c *Config) { c.IdleTimeout = 5 * time.Minute }})
		f := e.serveTLS(t)
		_, url := e.allocate("CA-slow-tls", "")
		rec := &recordCounter{}
		c := f.dial(t, f.wss(e, url), nil, rec)
		fl := floodUntilStalled(t, c)
		fl.readAll(t)
		echo(t, c, "after the flood")
		if got := e.relayedSockets("", "tls"); got != 1 {
			t.Errorf("TLS sockets on the loops = %d, want 1", got)
		}
		if got := rec.count(5 + 5 + 1 + tls13.TagLen); got < 100 {
			t.Errorf("KeyUpdate records read by the client = %d, want more than 100", got)
		}
	})
}
