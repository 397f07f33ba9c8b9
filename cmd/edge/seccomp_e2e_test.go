package main

import (
	"bufio"
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/seccomptest"
	"github.com/edge-voice/edge/internal/testpki"
	"github.com/edge-voice/edge/internal/testwait"
)

// The seccomp profile deploy/components/uring ships for proxy.relay: uring
// (the runtime's default profile refuses io_uring), enforced by the kernel
// on edge and its plugin processes through a user's whole path: edge
// terminating TLS, a Twilio webhook through its plugin, a media socket on
// the uring loops, a CPU profile, a killed plugin restarted, a clean stop.
// Any system call the profile lacks crashes edge with SIGSYS and the
// caller's stack. With io_uring refused, as under the default profile,
// edge says so and the epoll loops carry the socket.
func TestUringRelayUnderTheShippedSeccompProfile(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Skip("io_uring is disabled on this machine (kernel.io_uring_disabled)")
	}
	ca := testpki.NewCA(t)
	cert, key := ca.Valid(t, "127.0.0.1").Write(t, t.TempDir(), "edge")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig("127.0.0.1")}, Timeout: 10 * time.Second}

	for _, tc := range []struct {
		name, relay string
		deny        []string
	}{
		{"profile as shipped", "uring", nil},
		{"io_uring refused", "epoll", []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			launcher, env := seccomptest.Launcher(t, edgetest.Binary(t), tc.deny...)
			env = append(env,
				"EDGE_PROXY__RELAY=uring", "EDGE_PROXY__URING_BATCH=1ms",
				"EDGE_TLS__CERT_FILE="+cert, "EDGE_TLS__KEY_FILE="+key,
				"TMPDIR="+t.TempDir())
			edge := edgetest.StartBinary(t, launcher, nil, env...)
			if !strings.HasPrefix(edge.PublicURL, "https://") {
				t.Fatalf("public listener %s does not terminate TLS", edge.PublicURL)
			}

			if !edge.WaitReady(60 * time.Second) {
				t.Fatal("edge not ready after 60s")
			}
			// The relay starts with the proxy's Run, beside the listeners.
			info := `edge_proxy_relay_info{configured="uring",running="` + tc.relay + `"}`
			testwait.Until(t, 60*time.Second, "the "+tc.relay+" relay running", func() bool { return seccompMetric(t, edge.AdminURL, info) == 1 })
			if tc.relay == "epoll" {
				// Log lines leave in batches (2 ms): wait for it.
				testwait.Until(t, 60*time.Second, "a warning that io_uring was refused", func() bool {
					return strings.Contains(edge.Log(), "uring relay unavailable")
				})
			}
			wsURL := seccompWebhook(t, client, edge.PublicURL, "CA00000000000000000000000000005c01")
			// The media URL's base derives from the configured :0; the
			// socket goes to the bound port.
			c := seccompDial(t, ca, "wss://"+strings.TrimPrefix(edge.PublicURL, "https://")+wsURL[strings.Index(wsURL, "/ws/"):])
			mediaStream(t, c, "CA-seccomp", 25)
			if got := seccompMetric(t, edge.AdminURL, `edge_proxy_relayed_sockets_total{client="tls",relay="`+tc.relay+`"}`); got != 1 {
				t.Errorf("sockets carried by the %s relay = %v, want 1", tc.relay, got)
			}
			c.Close(websocket.StatusNormalClosure, "done")

			// A CPU profile: the runtime's profiling timers.
			resp, err := http.Get(edge.AdminURL + "/debug/pprof/profile?seconds=1")
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("CPU profile: %s", resp.Status)
			}

			// A plugin killed is restarted (fork, exec, wait, under the
			// profile both) and answers the next webhook.
			plugin := edgetest.ChildPID(t, edge.Pid(), "plugin twilio")
			if err := syscall.Kill(plugin, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			testwait.Until(t, 60*time.Second, "twilio plugin restarted", func() bool {
				return seccompMetric(t, edge.AdminURL, `edge_plugin_restarts_total{plugin="twilio"}`) >= 1 &&
					provGet(t, edge.AdminURL+"/readyz") == 200
			})
			seccompWebhook(t, client, edge.PublicURL, "CA00000000000000000000000000005c02")

			if !edge.Stop(30 * time.Second) {
				t.Fatal("edge did not stop within 30s of SIGTERM")
			}
			if code := edge.ExitCode(); code != 0 || strings.Contains(edge.Log(), "SIGSYS") {
				t.Fatalf("exit code %d under the profile:\n%s", code, edge.Log())
			}
		})
	}
}

var twimlStreamURL = regexp.MustCompile(`<Stream url="([^"]+)"`)

// seccompWebhook posts a Twilio webhook (the embedded default takes them
// unsigned) and returns the media URL of the TwiML answer.
func seccompWebhook(t *testing.T, client *http.Client, base, callSid string) string {
	t.Helper()
	resp, err := client.PostForm(base+"/api/v1/twilio/allocate?merchant_id=demo", url.Values{"CallSid": {callSid}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := twimlStreamURL.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("webhook: %s\n%s", resp.Status, body)
	}
	return html.UnescapeString(string(m[1]))
}

func seccompDial(t *testing.T, ca *testpki.CA, u string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig("127.0.0.1")}}
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// seccompMetric reads one sample of edge's /metrics (0 when absent).
func seccompMetric(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
