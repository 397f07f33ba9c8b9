package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
)

// The predecessor's Deployment had Prometheus scrape /metrics on port 9090
// without credentials; edge's admin listener wants admin_token from other
// hosts, so that scrape configuration got 401. With listen.metrics set, a
// GET of /metrics without a token gets edge's series there, the admin API
// is not served there (404), and edge WARNs that other hosts reach it.
func TestMetricsListenerServesAScrapeWithoutAToken(t *testing.T) {
	const token = "metrics-e2e-admin-token-0123456789abcdef"
	edge := edgetest.Start(t, nil, "EDGE_LISTEN__METRICS=0.0.0.0:0", "EDGE_ADMIN_TOKEN="+token)
	t.Cleanup(func() { edge.Stop(30 * time.Second) })
	log := waitLog(t, edge, "listener=metrics")
	m := regexp.MustCompile(`msg=listening (?:\S+ )*?listener=metrics addr=\S*:(\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no listening line of the metrics listener:\n%s", log)
	}
	metrics := "http://127.0.0.1:" + m[1]

	get := func(method, url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := get(http.MethodGet, metrics+"/metrics")
	if status != http.StatusOK || !strings.Contains(body, "\n# TYPE allocations_total counter\n") || !strings.Contains(body, "\nallocations_total{") {
		t.Fatalf("GET /metrics without a token on listen.metrics: %d\n%.400s", status, body)
	}
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/status"}, {http.MethodPost, "/api/v1/drain"}, {http.MethodPost, "/api/v1/release"},
		{http.MethodGet, "/api/v1/config"}, {http.MethodGet, "/debug/pprof/"}, {http.MethodGet, "/healthz"},
	} {
		if status, body := get(r.method, metrics+r.path); status != http.StatusNotFound {
			t.Errorf("%s %s on listen.metrics: %d %.200s, want 404", r.method, r.path, status, body)
		}
	}
	// The admin listener still wants its token for the same series.
	if status, _ := get(http.MethodGet, edge.AdminURL+"/metrics"); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token on the admin listener: %d, want 401", status)
	}
	waitLog(t, edge, "listen.metrics 0.0.0.0:0 serves /metrics without credentials")
}
