package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/edge-voice/edge/allocator"
)

// A merchant at its max_calls is refused by the generic API with
// 503 and its own code, while other merchants are served.
func TestGenericAllocateMerchantAtCap(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0", "agent-1")
	one := 1
	if err := e.alloc.SetMerchantConfig(context.Background(), "acme", allocator.MerchantConfig{MaxCalls: &one}); err != nil {
		t.Fatal(err)
	}
	if status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA1","merchant_id":"acme"}`); status != 200 {
		t.Fatalf("first call: %d %v", status, body)
	}
	status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA2","merchant_id":"acme"}`)
	if status != 503 || body["code"] != "merchant_at_cap" {
		t.Fatalf("second call of a merchant capped at 1: %d %v, want 503 merchant_at_cap", status, body)
	}
	if status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CB1","merchant_id":"other"}`); status != 200 {
		t.Fatalf("another merchant: %d %v", status, body)
	}
}

// A merchant over its admission rate gets 429 with Retry-After from the
// generic API.
func TestGenericAllocateRateLimited(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0", "agent-1")
	cfg := e.alloc.Config()
	cfg.Admission.Rate = allocator.RateConfig{MerchantPerSecond: 0.2, MerchantBurst: 1}
	e.alloc.Apply(cfg)
	if status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA1","merchant_id":"acme"}`); status != 200 {
		t.Fatalf("first call: %d %v", status, body)
	}
	req, _ := http.NewRequest(http.MethodPost, e.public.URL+"/api/v1/allocate", strings.NewReader(`{"call_sid":"CA2","merchant_id":"acme"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second call within the rate: %d, want 429", resp.StatusCode)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 5 {
		t.Fatalf("Retry-After = %q, want 1..5 seconds", resp.Header.Get("Retry-After"))
	}
}
