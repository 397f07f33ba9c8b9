package main

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/edge-voice/edge/internal/edgetest"
)

// otlpReceiver is a tiny OTLP/HTTP collector on loopback: it decodes
// every export and keeps the spans with their resource's service name.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   map[string]*tracepb.Span // by name, the first of each
	service string
	got     chan struct{}
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var req coltracepb.ExportTraceServiceRequest
	if err != nil || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				o.service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				if _, seen := o.spans[s.GetName()]; !seen {
					o.spans[s.GetName()] = s
				}
			}
		}
	}
	o.mu.Unlock()
	select {
	case o.got <- struct{}{}:
	default:
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// await returns the spans once every name has arrived.
func (o *otlpReceiver) await(t *testing.T, names ...string) map[string]*tracepb.Span {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		o.mu.Lock()
		missing := ""
		for _, n := range names {
			if o.spans[n] == nil {
				missing = n
			}
		}
		have := make(map[string]*tracepb.Span, len(o.spans))
		for k, v := range o.spans {
			have[k] = v
		}
		o.mu.Unlock()
		if missing == "" {
			return have
		}
		select {
		case <-o.got:
		case <-deadline:
			names := []string{}
			for k := range have {
				names = append(names, k)
			}
			t.Fatalf("span %q never exported; received %v", missing, names)
		}
	}
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			if v := a.GetValue().GetStringValue(); v != "" {
				return v
			}
			return a.GetValue().String()
		}
	}
	return ""
}

// TestTracesExportedToAnOTLPReceiver runs the real edge binary with the
// standard OTEL_* variables pointing at a receiver on loopback, makes one
// call (a signed Twilio webhook, its media socket to a built-in fake agent)
// and one generic allocate, and checks the spans that arrive.
func TestTracesExportedToAnOTLPReceiver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	rcv := &otlpReceiver{spans: map[string]*tracepb.Span{}, got: make(chan struct{}, 1)}
	collector := httptest.NewServer(rcv)
	t.Cleanup(collector.Close)

	const token = "e2e-twilio-token"
	edge := edgetest.Start(t, nil,
		"EDGE_PROVIDERS__PLUGINS__TWILIO__AUTH_TOKENS="+token,
		"EDGE_PROVIDERS__WEBHOOK_BASE_URL=https://edge.example.com",
		"OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL,
		"OTEL_SERVICE_NAME=edge-e2e",
		"OTEL_BSP_SCHEDULE_DELAY=50")
	if !edge.WaitReady(60 * time.Second) {
		t.Fatal("edge not ready after 60s")
	}

	path := "/api/v1/twilio/allocate?merchant_id=demo"
	form := url.Values{"CallSid": {"CA000000000000000000000000000000e1"}, "From": {"+15550100"}}
	req, _ := http.NewRequest("POST", edge.PublicURL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", edgetest.TwilioSign(token, "https://edge.example.com"+path, form))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<Stream url="([^"]+)"`).FindStringSubmatch(string(body))
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("webhook: %d %s", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The URL names listen.public as configured (port 0): dial the bound one.
	media, err := url.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	media.Host = strings.TrimPrefix(edge.PublicURL, "http://")
	c, _, err := websocket.Dial(ctx, media.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"event":"connected"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	if status, out := postJSON(t, edge.PublicURL+"/api/v1/allocate", `{"call_sid":"CA-trace-2","merchant_id":"demo"}`); status != 200 {
		t.Fatalf("generic allocate: %d %v", status, out)
	}

	spans := rcv.await(t, "webhook twilio", "media socket", "dial pod", "allocate", "redis allocate", "evalsha")
	rcv.mu.Lock()
	service := rcv.service
	rcv.mu.Unlock()
	if service != "edge-e2e" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's edge-e2e", service)
	}
	webhook, socket, dial := spans["webhook twilio"], spans["media socket"], spans["dial pod"]
	if got := spanAttr(webhook, "call_sid"); got != "CA000000000000000000000000000000e1" {
		t.Errorf("webhook call_sid = %q", got)
	}
	if l := socket.GetLinks(); len(l) != 1 || string(l[0].GetSpanId()) != string(webhook.GetSpanId()) ||
		string(l[0].GetTraceId()) != string(webhook.GetTraceId()) {
		t.Errorf("media socket links %v, want the webhook's span", l)
	}
	if string(dial.GetParentSpanId()) != string(socket.GetSpanId()) {
		t.Errorf("dial pod is not a child of the media socket")
	}
	// The Redis round trip is named after its script, and no span names
	// the build's files.
	script, evalsha := spans["redis allocate"], spans["evalsha"]
	if spanAttr(script, "edge.script") != "allocate" || spanAttr(script, "db.system") != "redis" {
		t.Errorf("redis allocate span attributes %v", script.GetAttributes())
	}
	rcv.mu.Lock()
	for name, s := range rcv.spans {
		if string(s.GetSpanId()) == string(evalsha.GetParentSpanId()) && !strings.HasPrefix(name, "redis ") {
			t.Errorf("evalsha's parent is %q, not a script's span", name)
		}
		for _, a := range s.GetAttributes() {
			if strings.HasPrefix(a.GetKey(), "code.") {
				t.Errorf("span %s carries %s=%v", name, a.GetKey(), a.GetValue())
			}
		}
	}
	rcv.mu.Unlock()
	var rpc bool
	rcv.mu.Lock()
	for name, s := range rcv.spans {
		if strings.HasSuffix(name, "/Webhook") && string(s.GetParentSpanId()) == string(webhook.GetSpanId()) {
			rpc = true
		}
	}
	rcv.mu.Unlock()
	if !rpc {
		t.Error("no plugin Webhook RPC span under the webhook's span")
	}
}
