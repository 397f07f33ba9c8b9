package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
)

// internal serves the surface's cluster-internal listener with allow and
// token, and /metrics from a registry holding the allocator's collector.
func (e *env) internal(t *testing.T, allow []string, token string) *httptest.Server {
	t.Helper()
	prefixes, err := api.ParseAllow(allow)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(allocator.NewPoolCollector(e.alloc))
	e.surface.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(e.surface.InternalSurface(prefixes, func() string { return token }))
	t.Cleanup(srv.Close)
	return srv
}

// A predecessor agent or dashboard pointed at the
// internal listener (the smart-router:8080 Service) gets every route it
// called, in the shapes it parsed, with no credentials.
func TestPredecessorClientsOnInternalListener(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0")
	e.register(t, "basic", "agent-1")
	in := e.internal(t, api.DefaultInternalAllow, "")

	// Allocation works here too (as on smart-router:8080).
	if status, body := post(t, in.URL+"/api/v1/allocate", `{"call_sid":"CA1"}`); status != 200 || body["pod_name"] != "agent-0" {
		t.Fatalf("allocate: %d %v", status, body)
	}
	status, body := get(t, in.URL+"/api/v1/pod/agent-0")
	if status != 200 || body["has_active_lease"] != true || body["lease_call_sid"] != "CA1" ||
		body["tier"] != "gold" || body["pod_name"] != "agent-0" || body["is_draining"] != false {
		t.Fatalf("pod info: %d %v, want flat has_active_lease/lease_call_sid", status, body)
	}
	status, body = get(t, in.URL+"/api/v1/status")
	pools, _ := body["pools"].(map[string]any)
	gold, _ := pools["gold"].(map[string]any)
	if status != 200 || body["status"] != "up" || body["active_calls"] != 1.0 || body["is_leader"] != nil && body["is_leader"] != false ||
		gold["type"] != "exclusive" || gold["assigned"] != 1.0 || gold["available"] != 0.0 {
		t.Fatalf("status: %d %v, want pools.gold {type,assigned,available}", status, body)
	}
	status, body = post(t, in.URL+"/api/v1/release", `{"call_sid":"CA1"}`)
	if status != 200 || body["released_to_pool"] != "pool:gold" || body["success"] != true {
		t.Fatalf("release: %d %v, want released_to_pool \"pool:gold\"", status, body)
	}
	if status, body = post(t, in.URL+"/api/v1/drain", `{"pod_name":"agent-0"}`); status != 200 || body["has_active_call"] != false {
		t.Fatalf("drain: %d %v", status, body)
	}
	for _, path := range []string{"/api/v1/health", "/api/v1/ready"} {
		if status, _ := get(t, in.URL+path); status != 200 {
			t.Fatalf("%s: %d", path, status)
		}
	}
	resp, err := http.Get(in.URL + "/api/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), "pool_assigned_pods{tier=\"gold\"} 1") {
		t.Fatalf("/api/v1/metrics: %d %s", resp.StatusCode, raw)
	}
}

// Release and drain stay closed to anyone outside internal.allow (the
// internet, if the port were ever exposed), and need internal.token when
// one is set; the probes stay open to allowed peers.
func TestInternalListenerRefusesStrangers(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0")
	outside := e.internal(t, []string{"10.0.0.0/8"}, "")
	for _, path := range []string{"/api/v1/release", "/api/v1/drain"} {
		if status, body := post(t, outside.URL+path, `{"pod_name":"agent-0","call_sid":"CA1"}`); status != 403 || body["code"] != "forbidden" {
			t.Fatalf("%s from a peer outside internal.allow: %d %v, want 403", path, status, body)
		}
	}
	tokened := e.internal(t, []string{"127.0.0.1"}, "internal-token-0123456789")
	if status, _ := post(t, tokened.URL+"/api/v1/drain", `{"pod_name":"agent-0"}`); status != 401 {
		t.Fatalf("drain without the token: %d, want 401", status)
	}
	if status, _ := post(t, tokened.URL+"/api/v1/drain", `{"pod_name":"agent-0"}`, "Authorization", "Bearer internal-token-0123456789"); status != 200 {
		t.Fatalf("drain with the token: %d, want 200", status)
	}
	if status, _ := get(t, tokened.URL+"/api/v1/health"); status != 200 {
		t.Fatalf("health with a token set: %d, want 200 (probes are open)", status)
	}
	if _, err := api.ParseAllow([]string{"not-a-cidr"}); err == nil {
		t.Fatal("a bad internal.allow entry was accepted")
	}
	// The public listener never serves them.
	resp, err := http.Post(e.public.URL+"/api/v1/release", "application/json", strings.NewReader(`{"call_sid":"CA1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 && resp.StatusCode != 405 {
		t.Fatalf("release on the public listener: %d", resp.StatusCode)
	}
}
