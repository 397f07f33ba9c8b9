package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/calls"
)

// syncBuffer is a log sink the listener's goroutines write to while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func startListener(t *testing.T, name string, h http.Handler, cfg api.ListenerConfig, log *slog.Logger, reg prometheus.Registerer) *api.Listener {
	t.Helper()
	ln, err := api.NewListener(name, "127.0.0.1:0", h, cfg, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ln.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln
}

// A webhook left "call allocated" and nothing with its method, route,
// status, latency, client or size. Every listener now logs one line per
// request ("http request") in edge's slog stream, with the call it was
// about, and counts its latency by status class.
func TestAccessLogOneLinePerRequest(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	reg := prometheus.NewPedanticRegistry()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/{provider}/allocate", func(w http.ResponseWriter, r *http.Request) {
		calls.NoteCallID(r.Context(), "CA123")
		w.Write([]byte("<Response/>"))
	})
	mux.HandleFunc("POST /api/v1/release", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such call", http.StatusNotFound)
	})
	mux.HandleFunc("GET /api/v1/calls/{call_sid}", func(w http.ResponseWriter, r *http.Request) {})
	ln := startListener(t, "public", mux, api.ListenerConfig{
		ClientIP: func(r *http.Request) netip.Addr { return netip.MustParseAddr("203.0.113.7") },
	}, log, reg)

	req, _ := http.NewRequest("POST", ln.URL()+"/api/v1/twilio/allocate", strings.NewReader("a=b"))
	req.Header.Set("User-Agent", "TwilioProxy/1.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Post(ln.URL()+"/api/v1/release", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	resp, err = http.Get(ln.URL() + "/api/v1/calls/CA456")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	got := buf.lines(t, "http request")
	if len(got) != 3 {
		t.Fatalf("%d access lines, want 2: %v", len(got), got)
	}
	first := got[0]
	want := map[string]any{"listener": "public", "method": "POST", "route": "/api/v1/twilio/allocate",
		"status": float64(200), "bytes": float64(len("<Response/>")), "client": "203.0.113.7",
		"user_agent": "TwilioProxy/1.1", "call_sid": "CA123"}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("access line %s = %v, want %v (line %v)", k, first[k], v, first)
		}
	}
	if _, ok := first["duration_ms"].(float64); !ok {
		t.Errorf("access line has no duration_ms: %v", first)
	}
	if got[1]["status"] != float64(404) || got[1]["call_sid"] != nil {
		t.Errorf("second line %v, want status 404 and no call_sid", got[1])
	}
	if got[2]["route"] != "/api/v1/calls/{call_sid}" || got[2]["call_sid"] != "CA456" {
		t.Errorf("timeline line %v, want its route pattern and the call it names", got[2])
	}
	series := gatherSeries(t, reg)
	if n := len(series["edge_http_request_duration_seconds"]); n != 3 {
		t.Errorf("%d latency series, want 3: %v", n, series["edge_http_request_duration_seconds"])
	}
	wantClass := []string{
		"class=2xx,listener=public,route=/api/v1/calls/{call_sid} 1",
		"class=2xx,listener=public,route=/api/v1/twilio/allocate 1",
		"class=4xx,listener=public,route=/api/v1/release 1",
	}
	if d := cmp.Diff(wantClass, series["edge_http_responses_total"]); d != "" {
		t.Errorf("edge_http_responses_total (-want +got):\n%s", d)
	}
}

// http.access_log off silences the lines; a sample below 1 keeps every
// failure and drops successes at that rate (0: failures only).
func TestAccessLogOffAndSampled(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var mu sync.Mutex
	cfg := api.AccessLog{Enabled: false, Sample: 1}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /bad", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	ln := startListener(t, "admin", mux, api.ListenerConfig{AccessLog: func() api.AccessLog {
		mu.Lock()
		defer mu.Unlock()
		return cfg
	}}, log, nil)
	get := func(path string) {
		resp, err := http.Get(ln.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("/ok")
	get("/bad")
	if n := len(buf.lines(t, "http request")); n != 0 {
		t.Fatalf("access log off: %d lines", n)
	}
	mu.Lock()
	cfg = api.AccessLog{Enabled: true, Sample: 0}
	mu.Unlock()
	for range 5 {
		get("/ok")
	}
	get("/bad")
	lines := buf.lines(t, "http request")
	if len(lines) != 1 || lines[0]["status"] != float64(503) {
		t.Fatalf("sample 0: lines %v, want the 503 only", lines)
	}
}

// gatherSeries is every counter's and histogram's series as
// "label=value,... count", by family, sorted.
func gatherSeries(t *testing.T, reg prometheus.Gatherer) map[string][]string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue()
			if h := m.GetHistogram(); h != nil {
				v = float64(h.GetSampleCount())
			}
			out[f.GetName()] = append(out[f.GetName()], strings.Join(labels, ",")+" "+ftoa(v))
		}
		sort.Strings(out[f.GetName()])
	}
	return out
}

// Health probes are left out of the access log by default (they were most
// of it), except a failing one; every other route keeps its line.
func TestAccessLogLeavesOutProbes(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var failing atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, r *http.Request) {})
	def := api.DefaultConfig().HTTP.AccessLogConfig()
	ln := startListener(t, "admin", mux, api.ListenerConfig{AccessLog: func() api.AccessLog { return def }}, log, nil)
	get := func(path string) {
		resp, err := http.Get(ln.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for range 10 {
		get("/readyz")
		get("/healthz")
	}
	get("/api/v1/status")
	failing.Store(true)
	get("/readyz")
	var got []string
	for _, l := range buf.lines(t, "http request") {
		got = append(got, fmt.Sprint(l["route"], " ", l["status"]))
	}
	if want := []string{"/api/v1/status 200", "/readyz 503"}; !slices.Equal(got, want) {
		t.Errorf("access lines %q, want %q", got, want)
	}
}
