package api_test

import (
	"net/http"
	"testing"

	"github.com/edge-voice/edge/api"
)

// The generic allocate API needs a caller's token and allocates only for
// that caller's merchants. Before, five anonymous requests took five pods.
func TestGenericAllocateNeedsAToken(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0", "agent-1", "agent-2")
	e.callers.Apply(api.OpenOff, []api.CallerToken{
		{Name: "crm", Token: "crm-token-0123456789", Merchants: []string{"acme"}},
		{Name: "ops", Token: "ops-token-0123456789", Merchants: []string{"*"}},
	})
	url := e.public.URL + "/api/v1/allocate"
	cases := map[string]struct {
		body   string
		header []string
		status int
	}{
		"no token":               {`{"call_sid":"CA1","merchant_id":"acme"}`, nil, http.StatusUnauthorized},
		"wrong token":            {`{"call_sid":"CA1","merchant_id":"acme"}`, []string{"Authorization", "Bearer nope-nope-nope-nope"}, http.StatusUnauthorized},
		"token of another kind":  {`{"call_sid":"CA1","merchant_id":"acme"}`, []string{"Authorization", "Basic crm-token-0123456789"}, http.StatusUnauthorized},
		"another merchant":       {`{"call_sid":"CA1","merchant_id":"globex"}`, []string{"Authorization", "Bearer crm-token-0123456789"}, http.StatusForbidden},
		"no merchant, scoped":    {`{"call_sid":"CA1"}`, []string{"Authorization", "Bearer crm-token-0123456789"}, http.StatusForbidden},
		"its merchant":           {`{"call_sid":"CA1","merchant_id":"acme"}`, []string{"Authorization", "bearer crm-token-0123456789"}, http.StatusOK},
		"any merchant, wildcard": {`{"call_sid":"CA2","merchant_id":"globex"}`, []string{"Authorization", "Bearer ops-token-0123456789"}, http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if status, out := post(t, url, tc.body, tc.header...); status != tc.status {
				t.Fatalf("allocate: %d %v, want %d", status, out, tc.status)
			}
		})
	}
	// Only the two authorised calls hold pods.
	status, out := get(t, e.admin.URL+"/api/v1/status")
	if status != 200 || out["active_calls"] != float64(2) {
		t.Fatalf("status: %d %v, want 2 active calls", status, out)
	}
}

// Posting a live call's call_sid as another caller answers 409 with no
// media URL: the stranger used to get the victim's URL and connect first.
func TestLiveCallURLOnlyForItsCreator(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0")
	e.callers.Apply(api.OpenOff, []api.CallerToken{
		{Name: "crm", Token: "crm-token-0123456789", Merchants: []string{"*"}},
		{Name: "other", Token: "other-token-0123456789", Merchants: []string{"*"}},
	})
	url := e.public.URL + "/api/v1/allocate"
	body := `{"call_sid":"CA9","merchant_id":"acme"}`
	if status, out := post(t, url, body, "Authorization", "Bearer crm-token-0123456789"); status != 200 {
		t.Fatalf("creator: %d %v", status, out)
	}
	status, out := post(t, url, body, "Authorization", "Bearer other-token-0123456789")
	if status != http.StatusConflict || out["code"] != "call_exists" || out["ws_url"] != nil {
		t.Fatalf("another caller: %d %v, want 409 call_exists without ws_url", status, out)
	}
	if status, out := post(t, url, body, "Authorization", "Bearer crm-token-0123456789"); status != 200 || out["was_existing"] != true {
		t.Fatalf("the creator's retry: %d %v", status, out)
	}
}
