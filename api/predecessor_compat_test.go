package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edge-voice/edge/api"
)

// postRaw sends body with exactly the headers given (none by default: no
// Content-Type, as a client that posts a string without one).
func postRaw(t *testing.T, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

// The voice agents allocate with the predecessor's client: a POST of
// /api/v1/allocate to http://smart-router:8080, without credentials. On the
// internal listener (private sources only, as for release and drain) it
// works with generic_api closed; the public listener stays closed.
func TestInternalListenerTakesTheAgentsAllocateWithoutAToken(t *testing.T) {
	e := newEnv(t)
	e.callers.Apply(api.OpenOff, []api.CallerToken{{Name: "crm", Token: "crm-token-0123456789", Merchants: []string{"globex"}}})
	e.register(t, "gold", "agent-0", "agent-1")
	in := e.internal(t, api.DefaultInternalAllow, "")

	const agents = `{"call_sid":"CA1","reseller_id":"acme","provider":"twilio"}`
	status, body := post(t, in.URL+"/api/v1/allocate", agents)
	pod, _ := body["pod_name"].(string)
	if status != 200 || pod == "" || body["success"] != true || body["ws_url"] == "" {
		t.Fatalf("the agents' allocate on the internal listener: %d %v, want 200 with a pod", status, body)
	}
	other := map[string]string{"agent-0": "agent-1", "agent-1": "agent-0"}[pod]
	// Its retry (another agent replica, the same client) gets the same
	// answer, media URL included.
	status, body = postRaw(t, in.URL+"/api/v1/allocate", agents)
	if status != 200 || body["pod_name"] != pod || body["was_existing"] != true || body["ws_url"] == "" {
		t.Fatalf("the retry without a Content-Type: %d %v", status, body)
	}
	// The public listener still wants a token.
	if status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA2"}`); status != 401 {
		t.Fatalf("token-less allocate on the public listener: %d %v, want 401", status, body)
	}
	// A generic API token keeps its scope on the internal listener too.
	if status, body := post(t, in.URL+"/api/v1/allocate", `{"call_sid":"CA3","merchant_id":"acme"}`,
		"Authorization", "Bearer crm-token-0123456789"); status != 403 {
		t.Fatalf("a token for globex allocating for acme on the internal listener: %d %v, want 403", status, body)
	}
	// Peers outside internal.allow get nothing.
	outside := e.internal(t, []string{"10.0.0.0/8"}, "")
	if status, body := post(t, outside.URL+"/api/v1/allocate", `{"call_sid":"CA4"}`); status != 403 {
		t.Fatalf("allocate from outside internal.allow: %d %v, want 403", status, body)
	}
	// internal.token, once set, is wanted here as for release and drain.
	tokened := e.internal(t, []string{"127.0.0.1"}, "internal-token-0123456789")
	if status, body := post(t, tokened.URL+"/api/v1/allocate", `{"call_sid":"CA5"}`); status != 401 {
		t.Fatalf("allocate without internal.token: %d %v, want 401", status, body)
	}
	if status, body := post(t, tokened.URL+"/api/v1/allocate", `{"call_sid":"CA5"}`,
		"Authorization", "Bearer internal-token-0123456789"); status != 200 || body["pod_name"] != other {
		t.Fatalf("allocate with internal.token: %d %v", status, body)
	}
}

// The predecessor processed release and drain whatever their Content-Type
// (none, text/plain); edge's internal listener answered 415. The reason for
// 415 (a browser's form or text/plain POST needs no CORS preflight) is the
// admin listener's: there it stays, and a cross-origin browser request is
// refused on both.
func TestInternalReleaseAndDrainTakeAnyContentType(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0", "agent-1")
	in := e.internal(t, api.DefaultInternalAllow, "")
	for _, call := range []string{"CA1", "CA2"} {
		if status, body := post(t, in.URL+"/api/v1/allocate", `{"call_sid":"`+call+`"}`); status != 200 {
			t.Fatalf("allocate %s: %d %v", call, status, body)
		}
	}
	if status, body := postRaw(t, in.URL+"/api/v1/release", `{"call_sid":"CA1"}`); status != 200 || body["success"] != true {
		t.Fatalf("release without a Content-Type: %d %v, want 200", status, body)
	}
	if status, body := postRaw(t, in.URL+"/api/v1/release", `{"call_sid":"CA2"}`, "Content-Type", "text/plain"); status != 200 {
		t.Fatalf("release as text/plain: %d %v, want 200", status, body)
	}
	if status, body := postRaw(t, in.URL+"/api/v1/drain", `{"pod_name":"agent-0"}`); status != 200 || body["success"] != true {
		t.Fatalf("drain without a Content-Type: %d %v, want 200", status, body)
	}
	if status, body := postRaw(t, in.URL+"/api/v1/drain", `{"pod_name":"agent-1"}`,
		"Content-Type", "text/plain", "Origin", "https://evil.example"); status != 403 {
		t.Fatalf("a cross-origin browser drain on the internal listener: %d %v, want 403", status, body)
	}
	if status, body := postRaw(t, e.admin.URL+"/api/v1/drain", `{"pod_name":"agent-1"}`); status != http.StatusUnsupportedMediaType {
		t.Fatalf("drain without a Content-Type on the admin listener: %d %v, want 415", status, body)
	}
}

// The predecessor's status answers "status":"up", and "down" when Redis
// fails; edge answered "ok". (The internal listener's "down" is the
// predecessor's whole answer: TestInternalStatusWithRedisDownAnswersAsThePredecessor.)
func TestStatusSaysUpOrDown(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0")
	in := e.internal(t, api.DefaultInternalAllow, "")
	for name, url := range map[string]string{"internal": in.URL, "admin": e.admin.URL} {
		if status, body := get(t, url+"/api/v1/status"); status != 200 || body["status"] != "up" {
			t.Fatalf("%s status: %d %v, want \"status\":\"up\"", name, status, body)
		}
	}
	e.srv.Stop()
	for name, url := range map[string]string{"internal": in.URL, "admin": e.admin.URL} {
		if _, body := get(t, url+"/api/v1/status"); body["status"] != "down" || body["success"] != false {
			t.Fatalf("%s status with Redis down: %v, want \"status\":\"down\"", name, body)
		}
	}
}
