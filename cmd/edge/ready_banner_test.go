package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
)

// waitLog waits for text in edge's log.
func waitLog(t *testing.T, edge *edgetest.Process, text string) string {
	t.Helper()
	if !edge.WaitLog(30*time.Second, text) {
		t.Fatalf("no log line %s after 30s:\n%s", text, edge.Log())
	}
	return edge.Log()
}

// "edge is ready" came before the plugins were up: an operator read it
// while webhooks still answered 503. It is logged once readiness passes,
// after every plugin's "provider plugin running".
func TestReadyIsLoggedAfterThePlugins(t *testing.T) {
	edge := edgetest.Start(t, nil)
	t.Cleanup(func() { edge.Stop(30 * time.Second) })
	log := waitLog(t, edge, `msg="edge is ready"`)
	ready := strings.Index(log, `msg="edge is ready"`)
	for _, p := range []string{"twilio", "plivo", "exotel", "telnyx"} {
		i := strings.Index(log, `msg="provider plugin running" replica=`)
		running := -1
		for i >= 0 {
			line := log[i:]
			line = line[:strings.IndexByte(line, '\n')]
			if strings.Contains(line, "plugin="+p+" ") {
				running = i
				break
			}
			next := strings.Index(log[i+1:], `msg="provider plugin running" replica=`)
			if next < 0 {
				break
			}
			i += 1 + next
		}
		if running < 0 || running > ready {
			t.Errorf("plugin %s: running at %d, edge is ready at %d:\n%s", p, running, ready, log)
		}
	}
}

// The start banner gave the embedded default's advice (fake agents, an
// unsigned Twilio curl that gets 403) whatever the configuration. It is
// printed only while edge runs its built-in fake agents, and the Twilio
// line only while Twilio's webhooks are not verified.
func TestBannerOnlyWhereItIsTrue(t *testing.T) {
	srv := testredis.Start(t)
	const pods = `EDGE_PODS__STATIC=[{"name":"agent-0","address":"127.0.0.1:1","tier":"standard"}]`
	for name, tc := range map[string]struct {
		args, env      []string
		banner, twilio bool
	}{
		"embedded default":           {banner: true, twilio: true},
		"fake agents, signed twilio": {env: []string{"EDGE_PROVIDERS__PLUGINS__TWILIO__AUTH_TOKENS=tok"}, banner: true},
		"a redis, no pods":           {args: []string{"--redis-url", srv.URL()}},
		"production: pods and a secret": {args: []string{"--redis-url", srv.URL()},
			env: []string{pods, "EDGE_PROVIDERS__PLUGINS__TWILIO__AUTH_TOKENS=tok"}},
	} {
		t.Run(name, func(t *testing.T) {
			edge := edgetest.Start(t, tc.args, tc.env...)
			t.Cleanup(func() { edge.Stop(30 * time.Second) })
			log := waitLog(t, edge, `msg="edge is ready"`)
			if got := strings.Contains(log, "Try it (ready to paste)"); got != tc.banner {
				t.Errorf("banner printed: %v, want %v:\n%s", got, tc.banner, log)
			}
			if got := strings.Contains(log, "twilio webhook:"); got != tc.twilio {
				t.Errorf("unsigned twilio curl printed: %v, want %v:\n%s", got, tc.twilio, log)
			}
		})
	}
}

var bannerCurl = regexp.MustCompile(`^\s+[a-z ]+:\s+(curl .*)$`)

// The banner's admin curls carried no token: with admin_token set, the
// pasted release and status answered 401. Every curl it prints, pasted
// into a shell that exported EDGE_ADMIN_TOKEN, is answered 2xx.
func TestBannerCurlsWorkPasted(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed: the banner's commands are curls")
	}
	const token = "banner-admin-token-0123456789abcdef"
	edge := edgetest.Start(t, nil, "EDGE_ADMIN_TOKEN="+token)
	t.Cleanup(func() { edge.Stop(30 * time.Second) })
	log := waitLog(t, edge, `msg="edge is ready"`)
	var curls []string
	for _, line := range strings.Split(log, "\n") {
		if m := bannerCurl.FindStringSubmatch(line); m != nil {
			curls = append(curls, m[1])
		}
	}
	if len(curls) < 3 {
		t.Fatalf("banner has %d curls, want allocate, release and status at least:\n%s", len(curls), log)
	}
	if strings.Contains(log, token) {
		t.Error("the banner printed the admin token")
	}
	for _, c := range curls {
		if strings.Contains(c, "/twilio/") {
			continue // answered with TwiML; its own test covers it
		}
		cmd := exec.Command("sh", "-c", c+" -o /dev/null -w '%{http_code}'")
		cmd.Env = append(os.Environ(), "EDGE_ADMIN_TOKEN="+token)
		out, err := cmd.Output()
		if err != nil || len(out) != 3 || out[0] != '2' {
			t.Errorf("pasted %q: status %q, err %v; want 2xx", c, out, err)
		}
	}
}
