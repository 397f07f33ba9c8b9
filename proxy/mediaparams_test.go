package proxy

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// A media URL minted with provider parameters reaches the pod with exactly
// that query, and the pod is told it is edge's (Edge-Media-Params, a
// client's own dropped). Anything else on that URL (a parameter added,
// changed, encoded, a second "?", a "#", one too long) is refused before
// Redis and the pod: the token covers the query.
func TestSignedQueryReachesThePod(t *testing.T) {
	e := newEnv(t, envOpt{})
	ctx := context.Background()
	al, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA1"})
	if err != nil {
		t.Fatal(err)
	}
	pod := al.PodName
	u := e.signer.URLWithQuery(e.base(), "CA1", pod, agentPath, "sample-rate=16000")
	path := strings.TrimPrefix(u[:strings.IndexByte(u, '?')], e.base())

	for name, tc := range map[string]struct {
		query  string
		status int
	}{
		"no query":             {"", http.StatusForbidden},
		"other value":          {"sample-rate=24000", http.StatusForbidden},
		"undeclared added":     {"sample-rate=16000&x=1", http.StatusForbidden},
		"repeated":             {"sample-rate=16000&sample-rate=8000", http.StatusForbidden},
		"too long":             {"sample-rate=16000" + strings.Repeat("0", 600), http.StatusForbidden},
		"encoded name":         {"sample%2Drate=16000", http.StatusForbidden},
		"encoded slash":        {"sample-rate=16000%2F..%2Fadmin", http.StatusForbidden},
		"dot-dot":              {"sample-rate=..", http.StatusForbidden},
		"second question mark": {"sample-rate=16000?x=/admin", http.StatusForbidden},
		"fragment":             {"sample-rate=16000#/admin", http.StatusForbidden},
		"encoded NUL":          {"sample-rate=16000%00", http.StatusBadRequest},
		"encoded CR LF":        {"sample-rate=16000%0d%0aX:%20y", http.StatusBadRequest},
	} {
		t.Run(name, func(t *testing.T) {
			target := path
			if tc.query != "" {
				target += "?" + tc.query
			}
			before := e.trips.Load()
			if got := rawUpgrade(t, e.srv.Listener.Addr().String(), target); got != tc.status {
				t.Errorf("GET %s: %d, want %d", target, got, tc.status)
			}
			if trips := e.trips.Load() - before; trips != 0 {
				t.Errorf("%d Redis round trips before refusing, want 0", trips)
			}
		})
	}
	if n := e.agents[pod].Sockets.Load(); n != 0 {
		t.Fatalf("pod got %d sockets from refused URLs", n)
	}

	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPHeader: http.Header{mediaurl.ParamsHeader: {"sample-rate=24000"}}})
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	echo(t, c, "hello")
	ag := e.agents[pod]
	if got, want := ag.Paths(), agentPath+"?sample-rate=16000"; len(got) != 1 || got[0] != want {
		t.Errorf("pod saw %q, want [%q]", got, want)
	}
	if got := ag.Headers()[0].Values(mediaurl.ParamsHeader); len(got) != 1 || got[0] != "sample-rate=16000" {
		t.Errorf("pod's %s = %q, want [sample-rate=16000] (edge's, not the client's)", mediaurl.ParamsHeader, got)
	}
	c.Close(websocket.StatusNormalClosure, "")
	e.waitSockets(0)
}

// A URL minted without parameters admits no query: a client's own is
// refused with 400 before Redis and the pod (which would refuse it in
// turn, or read what edge never vouched for), whatever bytes it holds.
func TestUnsignedQueryIsRefusedBeforeRedis(t *testing.T) {
	e := newEnv(t, envOpt{})
	pod, u := e.allocate("CA1", "")
	path := strings.TrimPrefix(u, e.base())
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	for name, q := range map[string]string{
		"parameter":       "sample-rate=44100",
		"high bytes":      "x=\x80\xff",
		"encoded dot-dot": "p=%2e%2e%2fadmin",
		"long":            "x=" + strings.Repeat("a", 4000),
		"empty value":     "x",
	} {
		t.Run(name, func(t *testing.T) {
			before := e.trips.Load()
			if got := rawUpgrade(t, addr, path+"?"+q); got != http.StatusBadRequest {
				t.Errorf("status = %d, want 400", got)
			}
			if n := e.trips.Load() - before; n != 0 {
				t.Errorf("%d Redis round trips for a refused query, want 0", n)
			}
		})
	}
	if got := value(e.px.metrics.refused.WithLabelValues("unsigned_query")); got != 5 {
		t.Errorf("refused{unsigned_query} = %v, want 5", got)
	}
	if n := len(e.agents[pod].Paths()); n != 0 {
		t.Errorf("the pod was asked %d times, want never", n)
	}
	// The URL as minted still opens.
	c := e.mustDial(u)
	echo(t, c, "hello")
	c.Close(websocket.StatusNormalClosure, "")
	e.waitSockets(0)
}

// rawUpgrade sends a WebSocket opening handshake for target exactly as
// written (no client library normalises it) and returns the status.
func rawUpgrade(t *testing.T, addr, target string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Write([]byte("GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer to %s: %v", target, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
