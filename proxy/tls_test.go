package proxy

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// A media socket that arrived over TLS (edge terminating it, tls.*) is a
// *tls.Conn once hijacked: the epoll relay moves raw bytes of plain TCP
// fds and would relay ciphertext, so such a socket must take the goroutine
// relay, while a plain socket beside it keeps the epoll relay. Both keep
// the proxy's contract: echoes of messages larger than a TLS record, and
// edge's own close (1008 on a lost lease) delivered through the TLS conn.
func TestTLSClientTakesTheGoroutineRelay(t *testing.T) {
	e := newEnv(t, envOpt{relay: RelayEpoll, cfg: func(c *Config) { c.RenewInterval = time.Hour }})
	tlsSrv := httptest.NewUnstartedServer(e.px)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	_, plainURL := e.allocate("CA-plain", "")
	plain := e.mustDial(plainURL)
	echo(t, plain, "plain")
	e.checkCarried(t, RelayEpoll, 1)

	_, url := e.allocate("CA-tls", "")
	url = "wss" + strings.TrimPrefix(tlsSrv.URL, "https") + url[len(e.base()):]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: tlsSrv.Client()})
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	for i := range 20 {
		echo(t, c, strings.Repeat("x", i*100))
	}
	// 40 KiB: several TLS records (16 KiB each) in one message.
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10/16)
	if err := c.Write(ctx, websocket.MessageBinary, big); err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	if _, got, err := c.Read(ctx); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("40 KiB echo over TLS: %d bytes, %v", len(got), err)
	}
	if got := e.px.loops.carried.Load(); got != 1 {
		t.Errorf("sockets on the epoll loops = %d, want 1 (the plain one only)", got)
	}
	echo(t, plain, "plain still flows")

	if _, err := e.alloc.Release(context.Background(), "CA-tls"); err != nil {
		t.Fatal(err)
	}
	e.px.renewOnce(context.Background())
	if got := readClose(t, c); got != ClosePolicy {
		t.Errorf("TLS socket's close status = %d, want %d", got, ClosePolicy)
	}
	e.waitSockets(1)
}
