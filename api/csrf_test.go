package api_test

import (
	"net/http"
	"testing"
)

// A page on another origin cannot drive the admin API through a browser:
// a cross-origin text/plain POST drained a pod (no preflight needed).
func TestAdminRefusesCrossOriginAndNonJSON(t *testing.T) {
	e := newEnv(t)
	e.register(t, "gold", "agent-0")
	drain := e.admin.URL + "/api/v1/drain"
	body := `{"pod_name":"agent-0"}`
	cases := map[string]struct {
		header []string
		status int
	}{
		"cross-origin JSON":         {[]string{"Origin", "https://evil.example"}, http.StatusForbidden},
		"cross-site fetch metadata": {[]string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		"same-site other origin":    {[]string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		"text/plain body":           {[]string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		"form body":                 {[]string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		"no content type":           {[]string{"Content-Type", ""}, http.StatusUnsupportedMediaType},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, out := post(t, drain, body, tc.header...)
			if status != tc.status {
				t.Fatalf("drain: %d %v, want %d", status, out, tc.status)
			}
		})
	}
	// Nothing was drained by the refused requests.
	status, out := get(t, e.admin.URL+"/api/v1/pod/agent-0")
	if pod, _ := out["pod"].(map[string]any); status != 200 || pod["is_draining"] != false {
		t.Fatalf("pod after refused drains: %d %v", status, out)
	}
	// A tool's JSON request, or a same-origin one, goes through.
	if status, out := post(t, drain, body, "Origin", e.admin.URL); status != 200 {
		t.Fatalf("same-origin drain: %d %v", status, out)
	}
}
