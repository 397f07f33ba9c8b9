package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/edge-voice/edge/api"
)

// The predecessor's status handler answers HTTP 200 on every path; with
// Redis down its binary answered exactly
// {"pools":{},"active_calls":0,"is_leader":false,"status":"down"} (run
// beside edge on one Redis, the Redis then stopped). edge's internal
// listener, where the predecessor's clients call status, answered 503 with
// none of pools, active_calls or is_leader. It now answers the
// predecessor's four fields with its values and types, edge's own beside
// them; the admin listener, edge's own surface, keeps its 503.
func TestInternalStatusWithRedisDownAnswersAsThePredecessor(t *testing.T) {
	e := newEnv(t)
	e.surface.Handlers.IsLeader = func() bool { return true }
	e.register(t, "gold", "agent-0")
	in := e.internal(t, api.DefaultInternalAllow, "")
	e.srv.Stop()

	resp, err := http.Get(in.URL + "/api/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("status body: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("internal status with Redis down: HTTP %d, want 200 (the predecessor's)", resp.StatusCode)
	}
	want := map[string]string{"pools": `{}`, "active_calls": `0`, "is_leader": `false`, "status": `"down"`}
	for k, v := range want {
		if got, ok := body[k]; !ok || string(got) != v {
			t.Errorf("%s = %s (present %v), want %s", k, got, ok, v)
		}
	}
	// edge's own fields, beside the predecessor's: what failed.
	if string(body["code"]) != `"redis_unavailable"` || string(body["success"]) != `false` {
		t.Errorf("edge's fields: code %s success %s, want \"redis_unavailable\" and false", body["code"], body["success"])
	}

	if status, body := get(t, e.admin.URL+"/api/v1/status"); status != http.StatusServiceUnavailable || body["status"] != "down" {
		t.Errorf("admin status with Redis down: %d %v, want 503 \"down\"", status, body)
	}
}
