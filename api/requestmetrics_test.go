package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/api"
)

// The predecessor's binary exported http_requests_total{method,endpoint,
// status}, http_request_duration_seconds and panics_recovered_total, and
// its dashboards read them; edge exported no request metrics and let a
// handler's panic reach net/http. Every listener now counts its requests
// by route (the path of the route's pattern, a provider's name filled in
// once it answered), times them, and recovers a handler's panic with a 500
// (edge_http_panics_recovered_total), serving on.
func TestListenersCountRequestsAndRecoverPanics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/release", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
	mux.HandleFunc("POST /api/v1/{provider}/allocate", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("provider") != "twilio" {
			w.WriteHeader(http.StatusNotFound) // an unknown provider
		}
	})
	mux.HandleFunc("GET /boom", func(w http.ResponseWriter, r *http.Request) { panic("a handler's bug") })
	ln, err := api.NewListener("internal", "127.0.0.1:0", mux, api.ListenerConfig{}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ln.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	send := func(method, path string) int {
		req, _ := http.NewRequest(method, ln.URL()+path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	send("POST", "/api/v1/release")
	send("POST", "/api/v1/release")
	send("POST", "/api/v1/twilio/allocate")
	send("POST", "/api/v1/somebody-random/allocate")
	send("GET", "/nowhere")
	if code := send("GET", "/boom"); code != http.StatusInternalServerError {
		t.Fatalf("a panicking handler answered %d, want 500", code)
	}
	if code := send("POST", "/api/v1/release"); code != http.StatusNotFound {
		t.Fatalf("after a panic the listener answered %d", code)
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			line := strings.Join(labels, ",")
			switch f.GetName() {
			case "edge_http_requests_total":
				got[f.GetName()] = append(got[f.GetName()], line+" "+ftoa(m.GetCounter().GetValue()))
			case "edge_http_request_duration_seconds":
				got[f.GetName()] = append(got[f.GetName()], line+" "+ftoa(float64(m.GetHistogram().GetSampleCount())))
			case "edge_http_panics_recovered_total":
				got[f.GetName()] = append(got[f.GetName()], line+" "+ftoa(m.GetCounter().GetValue()))
			}
		}
	}
	for _, v := range got {
		sort.Strings(v)
	}
	want := map[string][]string{
		"edge_http_requests_total": {
			"code=200,listener=internal,method=POST,route=/api/v1/twilio/allocate 1",
			"code=404,listener=internal,method=GET,route=unmatched 1",
			"code=404,listener=internal,method=POST,route=/api/v1/release 3",
			"code=404,listener=internal,method=POST,route=/api/v1/{provider}/allocate 1",
			"code=500,listener=internal,method=GET,route=/boom 1",
		},
		"edge_http_request_duration_seconds": {
			"code=200,listener=internal,method=POST,route=/api/v1/twilio/allocate 1",
			"code=404,listener=internal,method=GET,route=unmatched 1",
			"code=404,listener=internal,method=POST,route=/api/v1/release 3",
			"code=404,listener=internal,method=POST,route=/api/v1/{provider}/allocate 1",
			"code=500,listener=internal,method=GET,route=/boom 1",
		},
		"edge_http_panics_recovered_total": {"listener=internal 1"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("request metrics (-want +got):\n%s", d)
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
