package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

type env struct {
	rdb           *redis.Client
	srv           *testredis.Server
	alloc         *allocator.Allocator
	public, admin *httptest.Server
	token         string
	// callers authenticates the generic allocate API: open to anyone
	// unless a test applies tokens.
	callers *api.Callers
	surface *api.Surface
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{srv: testredis.Start(t), callers: api.NewCallers(api.OpenAnyone, nil)}
	opts := e.srv.Options()
	opts.ReadTimeout, opts.DialTimeout, opts.MaxRetries = 300*time.Millisecond, 300*time.Millisecond, -1
	e.rdb = redis.NewClient(opts)
	t.Cleanup(func() { e.rdb.Close() })
	var err error
	e.alloc, err = allocator.New(e.rdb, allocator.Config{Tiers: allocator.TierConfig{
		Tiers:        map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 1}, "basic": {Type: allocator.Shared, Target: 1, MaxConcurrent: 2}},
		DefaultChain: []string{"gold", "basic"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	svc := calls.NewService(e.alloc, mediaurl.NewSigner([]byte("test-secret"), time.Minute), func() string { return "wss://edge.example.com" }, nil)
	ready := &api.Readiness{}
	ready.Add("redis", func(ctx context.Context) error { return e.rdb.Ping(ctx).Err() })
	s := &api.Surface{
		Handlers:   &api.Handlers{Calls: svc, Pools: e.alloc, Callers: e.callers, Log: log},
		Ready:      ready,
		AdminToken: func() string { return e.token },
	}
	e.surface = s
	e.public = httptest.NewServer(s.Public())
	e.admin = httptest.NewServer(s.Admin())
	t.Cleanup(e.public.Close)
	t.Cleanup(e.admin.Close)
	return e
}

func (e *env) register(t *testing.T, tier string, pods ...string) {
	t.Helper()
	for _, p := range pods {
		if _, err := e.alloc.RegisterPod(context.Background(), allocator.Pod{Name: p, Tier: tier}); err != nil {
			t.Fatal(err)
		}
	}
}

// post sends body and decodes the JSON answer.
func post(t *testing.T, url, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: status %d, body %q is not JSON", req.Method, req.URL.Path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func TestAllocateReleaseDrain(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0")
	e.register(t, "basic", "agent-1")

	status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA1","reseller_id":"acme","provider":"plivo","flow":"v1","template":"survey"}`)
	want := map[string]any{
		"success": true, "pod_name": "agent-0", "source_pool": "pool:gold", "was_existing": false,
		"ws_url": "wss://edge.example.com/ws/pod/agent-0/agent/voice/breeze-buddy/plivo/callback/survey",
	}
	if body["ws_url"] != nil {
		body["ws_url"] = withoutToken(body["ws_url"].(string))
	}
	if status != 200 || !sameJSON(body, want) {
		t.Fatalf("allocate: %d %v, want 200 %v", status, body, want)
	}
	status, body = post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA1"}`)
	if status != 200 || body["was_existing"] != true || body["pod_name"] != "agent-0" ||
		withoutToken(fmt.Sprint(body["ws_url"])) != "wss://edge.example.com/ws/pod/agent-0/agent/voice/breeze-buddy/twilio/callback/order-confirmation/v2" {
		t.Fatalf("repeat allocate with defaults: %d %v", status, body)
	}
	_, body = post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA2","provider":"exotel"}`)
	if !strings.HasSuffix(body["ws_url"].(string), "/exotel/callback/template/v2") {
		t.Fatalf("exotel default template: %v", body["ws_url"])
	}

	status, body = post(t, e.admin.URL+"/api/v1/drain", `{"pod_name":"agent-0"}`)
	if status != 200 || body["has_active_call"] != true {
		t.Fatalf("drain: %d %v", status, body)
	}
	status, body = post(t, e.admin.URL+"/api/v1/release", `{"call_sid":"CA1"}`)
	if status != 200 || body["released_to_pool"] != "" || body["returned_to_pool"] != false || body["was_draining"] != true || body["pod_name"] != "agent-0" {
		t.Fatalf("release on a draining pod: %d %v", status, body)
	}
	if status, _ = post(t, e.admin.URL+"/api/v1/release", `{"call_sid":"CA1"}`); status != 404 {
		t.Fatalf("second release: %d, want 404", status)
	}
	if status, body = post(t, e.admin.URL+"/api/v1/drain", `{"pod_name":"nobody"}`); status != 404 || body["code"] != "pod_not_found" {
		t.Fatalf("drain unknown pod: %d %v", status, body)
	}
	if status, body = get(t, e.admin.URL+"/api/v1/pod/agent-0"); status != 200 || body["pod"].(map[string]any)["is_draining"] != true {
		t.Fatalf("pod info: %d %v", status, body)
	}
	status, body = get(t, e.admin.URL+"/api/v1/status")
	tiers, _ := body["tiers"].(map[string]any)
	if status != 200 || len(tiers) != 2 || body["active_calls"] != 1.0 {
		t.Fatalf("status: %d %v", status, body)
	}
}

func TestNoCapacityReasons(t *testing.T) {
	e := newEnv(t)
	if status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA1"}`); status != 503 || body["code"] != "no_pods" {
		t.Fatalf("empty pools: %d %v", status, body)
	}
	e.register(t, "gold", "agent-0")
	post(t, e.admin.URL+"/api/v1/drain", `{"pod_name":"agent-0"}`)
	if status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA1"}`); status != 503 || body["code"] != "all_draining" {
		t.Fatalf("all draining: %d %v", status, body)
	}
}

// Bad input gets a clear error and changes nothing in Redis.
func TestBadInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0")
	ctx := context.Background()
	before := e.rdb.DBSize(ctx).Val()
	cases := map[string]struct {
		url, body  string
		wantStatus int
	}{
		"body over 64 KiB":        {"/api/v1/allocate", `{"call_sid":"CA1","flow":"` + strings.Repeat("v", 70<<10) + `"}`, 413},
		"malformed JSON":          {"/api/v1/allocate", `{"call_sid":`, 400},
		"two JSON values":         {"/api/v1/allocate", `{"call_sid":"CA1"}{}`, 400},
		"empty body":              {"/api/v1/allocate", ``, 400},
		"missing call_sid":        {"/api/v1/allocate", `{"merchant_id":"acme"}`, 400},
		"call_sid with a colon":   {"/api/v1/allocate", `{"call_sid":"CA:1"}`, 400},
		"merchant with a space":   {"/api/v1/allocate", `{"call_sid":"CA1","merchant_id":"a b"}`, 400},
		"template with a slash":   {"/api/v1/allocate", `{"call_sid":"CA1","template":"../x"}`, 400},
		"call_sid too long":       {"/api/v1/allocate", `{"call_sid":"` + strings.Repeat("a", 129) + `"}`, 400},
		"call_sid is a number":    {"/api/v1/allocate", `{"call_sid":42}`, 400},
		"release without call":    {"/api/v1/release", `{}`, 400},
		"drain with a wildcard":   {"/api/v1/drain", `{"pod_name":"agent-*"}`, 400},
		"release unknown call":    {"/api/v1/release", `{"call_sid":"CA-unknown"}`, 404},
		"provider with uppercase": {"/api/v1/allocate", `{"call_sid":"CA1","provider":"a/b"}`, 400},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			base := e.public.URL
			if !strings.HasSuffix(tc.url, "allocate") {
				base = e.admin.URL
			}
			status, body := post(t, base+tc.url, tc.body)
			if status != tc.wantStatus || body["success"] != false || body["error"] == "" {
				t.Fatalf("%d %v, want %d with an error message", status, body, tc.wantStatus)
			}
		})
	}
	if after := e.rdb.DBSize(ctx).Val(); after != before {
		t.Fatalf("keys: %d before, %d after rejected requests", before, after)
	}
}

func TestAdminToken(t *testing.T) {
	e := newEnv(t)
	e.token = "s3cret"
	if status, _ := get(t, e.admin.URL+"/api/v1/status"); status != 401 {
		t.Fatalf("no token: %d, want 401", status)
	}
	if status, _ := post(t, e.admin.URL+"/api/v1/release", `{"call_sid":"CA1"}`, "Authorization", "Bearer wrong"); status != 401 {
		t.Fatalf("wrong token: %d, want 401", status)
	}
	if status, _ := get(t, e.admin.URL+"/healthz"); status != 200 {
		t.Fatalf("healthz must stay open for probes: %d", status)
	}
	req, _ := http.NewRequest(http.MethodGet, e.admin.URL+"/api/v1/status", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if status, _ := do(t, req); status != 200 {
		t.Fatalf("right token: %d", status)
	}
}

// Redis down: allocation answers 503 within the timeout, readiness fails;
// both recover when Redis is back.
func TestRedisDown(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0")
	e.srv.Pause()
	start := time.Now()
	status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA1"}`)
	if status != 503 || body["code"] != "redis_unavailable" || time.Since(start) > 2*time.Second {
		t.Fatalf("redis paused: %d %v after %v", status, body, time.Since(start))
	}
	for _, path := range []string{"/readyz", "/api/v1/ready"} {
		if status, _ := get(t, e.admin.URL+path); status != 503 {
			t.Fatalf("%s with redis paused: %d, want 503", path, status)
		}
	}
	// The public probe names the failed check but shows no internal error
	// text (it showed the Redis address and the error).
	status, body = get(t, e.public.URL+"/readyz")
	if failed, _ := body["failed"].([]any); status != 503 || len(failed) != 1 || failed[0] != "redis" {
		t.Fatalf("public readyz with redis paused: %d %v, want 503 naming redis only", status, body)
	}
	e.srv.Resume()
	if status, _ := get(t, e.admin.URL+"/readyz"); status != 200 {
		t.Fatalf("readyz after resume: %d", status)
	}
	if status, body := post(t, e.public.URL+"/api/v1/allocate", `{"call_sid":"CA2"}`); status != 200 {
		t.Fatalf("allocate after resume: %d %v", status, body)
	}
}

func sameJSON(got, want map[string]any) bool {
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	return string(a) == string(b)
}

// withoutToken drops the media token segment (/c.<token>) of a media URL:
// it carries an expiry, so it differs between two mints.
func withoutToken(u string) string { return mediaToken.ReplaceAllString(u, "/") }

var mediaToken = regexp.MustCompile(`/c\.[A-Za-z0-9_-]+/`)

// A drain names the instance it is for by its address (pod_ip): a
// force-deleted StatefulSet pod's preStop may drain after its replacement
// took the name, and must not take the replacement out of allocation.
// Without pod_ip a drain is for whatever is registered, as before.
func TestDrainOfAReplacedPodIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.alloc.RegisterPod(ctx, allocator.Pod{Name: "agent-0", Tier: "gold", Address: "10.88.0.4:8000"}); err != nil {
		t.Fatal(err)
	}
	// The replacement, same name, another address.
	if _, err := e.alloc.RegisterPod(ctx, allocator.Pod{Name: "agent-0", Tier: "gold", Address: "10.88.0.9:8000"}); err != nil {
		t.Fatal(err)
	}
	if status, body := post(t, e.admin.URL+"/api/v1/drain", `{"pod_name":"agent-0","pod_ip":"10.88.0.4"}`); status != 409 || body["code"] != "pod_replaced" {
		t.Fatalf("drain by the replaced instance: %d %v, want 409 pod_replaced", status, body)
	}
	if status, body := get(t, e.admin.URL+"/api/v1/pod/agent-0"); status != 200 || body["is_draining"] != false || body["status"] != "available" {
		t.Fatalf("the replacement after its predecessor's drain: %d %v, want available, not draining", status, body)
	}
	if status, body := post(t, e.admin.URL+"/api/v1/drain", `{"pod_name":"agent-0","pod_ip":"not-an-ip"}`); status != 400 {
		t.Fatalf("drain with a malformed pod_ip: %d %v, want 400", status, body)
	}
	if status, body := post(t, e.admin.URL+"/api/v1/drain", `{"pod_name":"agent-0","pod_ip":"10.88.0.9"}`); status != 200 || body["pod_name"] != "agent-0" {
		t.Fatalf("drain by the registered instance: %d %v", status, body)
	}
	if status, body := get(t, e.admin.URL+"/api/v1/pod/agent-0"); status != 200 || body["is_draining"] != true {
		t.Fatalf("pod info after its own drain: %d %v", status, body)
	}
}
