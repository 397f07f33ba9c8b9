package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
)

// pageServer serves e's admin surface with the status page and the
// running config, behind token.
func pageServer(t *testing.T, e *env, token, replica string) *httptest.Server {
	t.Helper()
	e.token = token
	e.surface.Handlers.Records = e.alloc
	e.surface.Page = &api.StatusPage{Replica: replica, Relay: func() (string, string) { return "uring", "epoll" }}
	e.surface.RunningConfig = func() json.Marshaler { return json.RawMessage(`{"admin_token":"[redacted]","b":1}`) }
	srv := httptest.NewServer(e.surface.Admin())
	t.Cleanup(srv.Close)
	return srv
}

func getPage(t *testing.T, url string, auth func(*http.Request)) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if auth != nil {
		auth(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// The page takes the admin token as a bearer token or as the password of
// Basic credentials, nothing else; it escapes what it shows, forbids
// anything external by its CSP, and shows pods, calls, drains,
// ejections, the leader and the relay.
func TestStatusPage(t *testing.T) {
	e := newEnv(t)
	const token = "page-token-0123456789"
	srv := pageServer(t, e, token, `<script>alert("x")</script>`)
	ctx := context.Background()
	e.register(t, "gold", "g0")
	e.register(t, "basic", "b0", "b1")
	if _, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA1", MerchantID: "m1"}); err != nil {
		t.Fatal(err)
	}
	e.alloc.Drain(ctx, "b0")
	if _, err := (allocator.MediaLeases{Alloc: e.alloc}).PodFailed(ctx, "b1", "timeout", allocator.Ejection{Backoff: time.Second, MaxBackoff: time.Minute, MaxPercent: 100}); err != nil {
		t.Fatal(err)
	}
	e.alloc.AcquireLeaderLock(ctx, "edge-0", time.Minute)

	for name, auth := range map[string]func(*http.Request){
		"none":           nil,
		"wrong password": func(r *http.Request) { r.SetBasicAuth("op", "nope") },
		"wrong bearer":   func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") },
		"token as user":  func(r *http.Request) { r.SetBasicAuth(token, "") },
	} {
		resp, body := getPage(t, srv.URL+"/", auth)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") || strings.Contains(body, "g0") {
			t.Errorf("%s: %d %q %q", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	if resp, _ := getPage(t, srv.URL+"/", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }); resp.StatusCode != http.StatusOK {
		t.Errorf("bearer token: %d", resp.StatusCode)
	}
	// Basic credentials open the page only: the API keeps its bearer token.
	if resp, _ := getPage(t, srv.URL+"/api/v1/pods", func(r *http.Request) { r.SetBasicAuth("op", token) }); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("Basic credentials on the API: %d", resp.StatusCode)
	}

	resp, body := getPage(t, srv.URL+"/", func(r *http.Request) { r.SetBasicAuth("op", token) })
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "style-src 'sha256-") || strings.Contains(csp, "unsafe") {
		t.Errorf("CSP = %q", csp)
	}
	if strings.Contains(body, "<script") || !strings.Contains(body, "&lt;script&gt;") {
		t.Errorf("the replica name is not escaped:\n%s", body)
	}
	for _, bad := range []string{"src=", "href=", "http://", "https://", "@import", "url("} {
		if strings.Contains(body, bad) {
			t.Errorf("the page refers to something external (%s)", bad)
		}
	}
	for _, want := range []string{
		`http-equiv="refresh"`, `<b id="leader">edge-0</b>`, "epoll (proxy.relay asks for uring)",
		`<td class="id">CA1</td><td>m1</td>`, `<span class="state allocated">allocated</span>`,
		`<table id="drains">`, `<td class="id">b0</td><td>basic</td>`,
		`<table id="ejections">`, `<td class="id">b1</td><td>basic</td><td>timeout</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page has no %s:\n%s", want, body)
		}
	}

	// Redis gone: the page says why, with the API's status for it.
	e.srv.Stop()
	resp, body = getPage(t, srv.URL+"/", func(r *http.Request) { r.SetBasicAuth("op", token) })
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `<p class="error" id="error">`) {
		t.Errorf("page with Redis stopped: %d\n%s", resp.StatusCode, body)
	}
}

// GET /api/v1/pods lists pods with their state; POST /api/v1/undrain ends
// a drain, refusing an invalid or unknown pod as drain does; GET
// /api/v1/config answers the running config.
func TestPodsUndrainAndConfigRoutes(t *testing.T) {
	e := newEnv(t)
	srv := pageServer(t, e, "", "r")
	e.register(t, "gold", "g0")
	if st, _ := post(t, srv.URL+"/api/v1/drain", `{"pod_name":"g0"}`); st != http.StatusOK {
		t.Fatalf("drain: %d", st)
	}
	st, out := get(t, srv.URL+"/api/v1/pods")
	pods, _ := out["pods"].([]any)
	if st != http.StatusOK || len(pods) != 1 || pods[0].(map[string]any)["state"] != "draining" {
		t.Fatalf("pods = %d %v", st, out)
	}
	if st, out := post(t, srv.URL+"/api/v1/undrain", `{"pod_name":"g0"}`); st != http.StatusOK || out["back_in_pool"] != true {
		t.Fatalf("undrain = %d %v", st, out)
	}
	if _, out := get(t, srv.URL+"/api/v1/pods"); out["pods"].([]any)[0].(map[string]any)["state"] != "available" {
		t.Fatalf("pods after undrain = %v", out)
	}
	for body, want := range map[string]int{`{"pod_name":"nope"}`: 404, `{"pod_name":"a/b"}`: 400, `{"pod_name":`: 400} {
		if st, _ := post(t, srv.URL+"/api/v1/undrain", body); st != want {
			t.Errorf("undrain %s = %d, want %d", body, st, want)
		}
	}
	if st, out := get(t, srv.URL+"/api/v1/config"); st != http.StatusOK || out["config"].(map[string]any)["admin_token"] != "[redacted]" {
		t.Errorf("config = %d %v", st, out)
	}
}

// A live call that moved mid-call shows how often and when it last did
// beside the pods it left; a call that never moved shows neither.
func TestStatusPageShowsResumptions(t *testing.T) {
	e := newEnv(t)
	const token = "page-token-0123456789"
	srv := pageServer(t, e, token, "edge-0")
	ctx := context.Background()
	e.register(t, "gold", "g0", "g1", "g2")
	first, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA1", MerchantID: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.alloc.Allocate(ctx, allocator.Request{CallID: "CA2", MerchantID: "m1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := (allocator.MediaLeases{Alloc: e.alloc}).Claim(ctx, "CA1", first.PodName, "r/1"); err != nil {
		t.Fatal(err)
	}
	moved, err := e.alloc.ResumeCall(ctx, "CA1", first.PodName, "r/1", allocator.Ejection{Backoff: time.Second, MaxBackoff: time.Minute, MaxPercent: 100}, true)
	if err != nil {
		t.Fatal(err)
	}
	tl, err := e.alloc.Timeline(ctx, "CA1")
	if err != nil || tl.Resumptions != 1 || tl.ResumedAt.IsZero() {
		t.Fatalf("timeline = %+v, %v", tl, err)
	}

	_, body := getPage(t, srv.URL+"/", func(r *http.Request) { r.SetBasicAuth("op", token) })
	if !strings.Contains(body, "<th>resumed</th>") {
		t.Errorf("the live calls table has no resumed column:\n%s", body)
	}
	row := func(id string) string {
		_, after, ok := strings.Cut(body, `<tr><td class="id">`+id+`</td>`)
		if !ok {
			t.Fatalf("page has no row for %s:\n%s", id, body)
		}
		r, _, _ := strings.Cut(after, "</tr>")
		return r
	}
	resumed := row("CA1")
	at := tl.ResumedAt.UTC().Format("15:04:05.000")
	if !strings.Contains(resumed, `<td class="id">`+moved.Pod+`</td>`) || !strings.Contains(resumed, `<td class="id">`+first.PodName+`</td>`) ||
		!strings.Contains(resumed, "<td>1, last "+at+" (") {
		t.Errorf("CA1's row does not show its resumption (1, last %s) off %s:\n%s", at, first.PodName, resumed)
	}
	if still := row("CA2"); !strings.HasSuffix(still, "<td></td>") {
		t.Errorf("CA2 never moved, yet its row shows a resumption:\n%s", still)
	}
}
