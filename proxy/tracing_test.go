package proxy

import (
	"context"
	"net/http"
	"testing"

	"github.com/coder/websocket"
)

// A client's trace context headers never reach the pod (docs/security.md:
// the pod sees only headers edge vouches for), tracing on or off; with
// tracing off edge writes none of its own.
func TestClientTraceHeadersNotForwarded(t *testing.T) {
	e := newEnv(t, envOpt{})
	pod, url := e.allocate("CA1", "")
	ctx := context.Background()
	forged := http.Header{
		"Traceparent": {"00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"},
		"Tracestate":  {"evil=1"}, "Baggage": {"user=evil"},
	}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: forged})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	echo(t, c, "hello")
	h := e.agents[pod].Headers()[0]
	for _, name := range []string{"Traceparent", "Tracestate", "Baggage"} {
		if v := h.Get(name); v != "" {
			t.Errorf("pod saw the client's %s: %q", name, v)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	e.waitSockets(0)
}
