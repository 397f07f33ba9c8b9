package proxy

import (
	"context"
	"net/http"
	"testing"

	"github.com/coder/websocket"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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

// A socket whose first pod is down: its span has one dial per attempt, the
// failed one with its reason, a "call moved" event, and the pod reached
// gets the socket span's traceparent.
func TestSocketSpanRecordsFailover(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, envOpt{cfg: failoverCfg, tracer: tp.Tracer("proxy")})
	e.addPod("pod-x", "gold", brokenPod(t, "closed"))
	callID, url := e.callOn("pod-x")
	c := e.mustDial(url)
	echo(t, c, "through the failover")
	c.Close(websocket.StatusNormalClosure, "")
	e.waitSockets(0)

	var socket sdktrace.ReadOnlySpan
	var dials []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "media socket":
			socket = s
		case "dial pod":
			dials = append(dials, s)
		}
	}
	if socket == nil || len(dials) != 2 {
		t.Fatalf("want a media socket span and two dial spans, got %v", rec.Ended())
	}
	got := map[string]string{}
	for _, a := range socket.Attributes() {
		got[string(a.Key)] = a.Value.Emit()
	}
	if got["call_sid"] != callID || got["pod"] != "pod-s" || got["close_code"] != "1000" {
		t.Errorf("media socket attributes %v", got)
	}
	if ev := socket.Events(); len(ev) != 1 || ev[0].Name != "call moved" {
		t.Errorf("media socket events %v, want one call moved", ev)
	}
	for i, want := range []string{"pod-x attempt 1 refused", "pod-s attempt 2 connected"} {
		d := map[string]string{}
		for _, a := range dials[i].Attributes() {
			d[string(a.Key)] = a.Value.Emit()
		}
		if g := d["pod"] + " attempt " + d["attempt"] + " " + d["outcome"]; g != want || dials[i].Parent().SpanID() != socket.SpanContext().SpanID() {
			t.Errorf("dial %d = %q (parent %v), want %q under the socket", i, g, dials[i].Parent().SpanID(), want)
		}
	}
	sc := socket.SpanContext()
	h := e.agents["pod-s"].Headers()
	if len(h) != 1 || h[0].Get("Traceparent") != "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01" {
		t.Errorf("pod-s saw %v, want the socket span's traceparent", h)
	}
}
