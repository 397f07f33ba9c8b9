package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
)

// clientFrom is a keep-alive client whose connections leave from ip (a
// loopback alias such as 127.0.0.2 is another source to edge).
func clientFrom(t *testing.T, ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// guesses sends n requests that each carry a wrong credential (auth
// writes it) on c, one after another on one kept-alive connection, and
// counts the answers: 401 (the credential was compared) and 429 (refused
// unchecked, with a Retry-After).
func guesses(t *testing.T, c *http.Client, url string, n int, auth func(*http.Request, int)) (checked, throttled int) {
	t.Helper()
	reused := 0
	for i := range n {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		auth(req, i)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) {
				if ci.Reused {
					reused++
				}
			},
		}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
			throttled++
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
				t.Fatalf("429 with Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("guess %d at %s: %s, want 401 or 429", i, url, resp.Status)
		}
	}
	if reused < n-1 {
		t.Fatalf("%d of %d requests reused the connection, want all but the first", reused, n)
	}
	return checked, throttled
}

// A client on one keep-alive connection could try thousands of admin
// passwords a second, each compared and answered 401. Now one source gets
// admin_auth.failure_burst (10) wrong credentials, then one a second,
// counted across the admin API, the status page and the internal
// listener; past them it is answered 429 unchecked and counted. Another
// source keeps its own allowance, and the right token works from it.
func TestAdminAuthFailuresAreThrottledPerSource(t *testing.T) {
	const token = "admin-auth-token-0123456789abcdef"
	edge := edgetest.Start(t, []string{"--set", "providers.builtin=false"},
		"EDGE_ADMIN_TOKEN="+token, "EDGE_INTERNAL__TOKEN="+token)
	guesser := clientFrom(t, "127.0.0.1")

	start := time.Now()
	const n = 200
	pageChecked, pageThrottled := guesses(t, guesser, edge.AdminURL+"/", n, func(r *http.Request, i int) {
		r.SetBasicAuth("admin", fmt.Sprintf("guess-%d", i))
	})
	apiChecked, apiThrottled := guesses(t, guesser, edge.AdminURL+"/api/v1/status", 20, func(r *http.Request, i int) {
		r.Header.Set("Authorization", fmt.Sprintf("Bearer guess-%d", i))
	})
	internalChecked, internalThrottled := guesses(t, guesser, edge.InternalURL+"/api/v1/status", 20, func(r *http.Request, i int) {
		r.Header.Set("Authorization", fmt.Sprintf("Bearer guess-%d", i))
	})
	// The allowance: 10 at once, then one a second, whatever the listener
	// (a bound on what was compared, not on how long anything took).
	checked := pageChecked + apiChecked + internalChecked
	if allowed := 10 + int(time.Since(start).Seconds()) + 1; checked > allowed {
		t.Errorf("%d wrong credentials compared from one source (page %d, API %d, internal %d), want at most %d",
			checked, pageChecked, apiChecked, internalChecked, allowed)
	}
	if pageThrottled == 0 || apiThrottled == 0 || internalThrottled == 0 {
		t.Errorf("throttled: page %d, API %d, internal %d; want some on each", pageThrottled, apiThrottled, internalThrottled)
	}

	// Another source: its own allowance; the right token works.
	other := clientFrom(t, "127.0.0.2")
	if c, th := guesses(t, other, edge.AdminURL+"/api/v1/status", 1, func(r *http.Request, _ int) {
		r.Header.Set("Authorization", "Bearer wrong")
	}); c != 1 || th != 0 {
		t.Errorf("another source's wrong token: %d compared, %d throttled, want it compared (401)", c, th)
	}
	for _, url := range []string{edge.AdminURL + "/api/v1/status", edge.AdminURL + "/", edge.InternalURL + "/api/v1/status"} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if strings.HasSuffix(url, "/") {
			req.SetBasicAuth("operator", token)
		} else {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := other.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("right token from another source, %s: %s, want 200", url, resp.Status)
		}
	}

	// The metrics count what happened, per listener.
	req, _ := http.NewRequest(http.MethodGet, edge.AdminURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := clientFrom(t, "127.0.0.3").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for series, want := range map[string]int{
		`edge_admin_auth_failures_total{listener="admin"}`:     pageChecked + apiChecked + 1,
		`edge_admin_auth_failures_total{listener="internal"}`:  internalChecked,
		`edge_admin_auth_throttled_total{listener="admin"}`:    pageThrottled + apiThrottled,
		`edge_admin_auth_throttled_total{listener="internal"}`: internalThrottled,
	} {
		got := "absent"
		if m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body); m != nil {
			got = string(m[1])
		}
		if got != strconv.Itoa(want) {
			t.Errorf("%s = %s, want %d", series, got, want)
		}
	}
}
