package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"html"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testpki"
	"github.com/edge-voice/edge/internal/testwait"
)

// TestEdgeTerminatesTLS runs the real edge binary with tls.* pointing at a
// Secret-like volume (certificates from a CA made here): a Twilio webhook
// signed over its https:// URL is answered with a wss:// stream URL, whose
// socket relays through edge to a plain fake agent; SNI picks the extra
// pair; a symlink-swap rotation reaches new handshakes while the open
// socket keeps flowing; a bad pair at reload keeps the last good one and
// is counted. The socket is relayed by the epoll loops, which took its
// TLS records over from crypto/tls.
func TestEdgeTerminatesTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	const token = "e2e-twilio-token"
	ca := testpki.NewCA(t)
	first := ca.Valid(t, "127.0.0.1", "edge.test")
	sec := testpki.NewSecret(t, first)
	media := ca.Valid(t, "media.test")
	mc, mk := media.Write(t, t.TempDir(), "media")
	cfg := edgetest.WriteFile(t, "edge.yaml", fmt.Sprintf(`
reload: {interval: 100ms}
tls:
  cert_file: %q
  key_file: %q
  certificates:
    - {cert_file: %q, key_file: %q}
`, sec.CertFile(), sec.KeyFile(), mc, mk))
	edge := edgetest.Start(t, []string{"--config", cfg}, "EDGE_PROVIDERS__PLUGINS__TWILIO__AUTH_TOKENS="+token)
	if !strings.HasPrefix(edge.PublicURL, "https://") {
		t.Fatalf("public listener %s: not TLS", edge.PublicURL)
	}
	addr := strings.TrimPrefix(edge.PublicURL, "https://")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig("")}}
	if !edge.WaitReady(60 * time.Second) {
		t.Fatal("edge not ready after 60s")
	}

	// The webhook, signed over the https:// URL Twilio was given.
	path := "/api/v1/twilio/allocate?merchant_id=demo"
	form := url.Values{"CallSid": {"CA00000000000000000000000000000e15"}, "From": {"+15550100"}}
	req, _ := http.NewRequest("POST", edge.PublicURL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", edgetest.TwilioSign(token, edge.PublicURL+path, form))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<Stream url="([^"]+)"`).FindStringSubmatch(string(body))
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("signed https webhook: %d %s", resp.StatusCode, body)
	}
	stream := html.UnescapeString(m[1])
	// The derived base names the configured port (0 here: the test binds
	// a free one); the scheme is what Twilio checks.
	if !strings.HasPrefix(stream, "wss://127.0.0.1:") {
		t.Fatalf("stream URL %q is not wss://", stream)
	}
	stream = "wss://" + addr + stream[strings.Index(stream, "/ws/pod/"):]

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, stream, &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatalf("open %s: %v", stream, err)
	}
	defer c.CloseNow()
	mediaStream(t, c, "CA-tls-1", 25)

	served := func(serverName string) *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, ca.ClientConfig(serverName))
		if err != nil {
			t.Fatalf("handshake for %q: %v", serverName, err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	if got := served("edge.test"); got.Cmp(first.Serial) != 0 {
		t.Fatalf("edge.test: serial %v, want %v", got, first.Serial)
	}
	if got := served("media.test"); got.Cmp(media.Serial) != 0 {
		t.Errorf("SNI media.test: serial %v, want the extra pair's %v", got, media.Serial)
	}

	// Rotation as cert-manager and the kubelet do it. edge polls the
	// files, so new handshakes are polled for the new certificate.
	second := ca.Valid(t, "127.0.0.1", "edge.test")
	sec.Swap(t, second)
	testwait.Until(t, 60*time.Second, "the rotated certificate served", func() bool { return served("edge.test").Cmp(second.Serial) == 0 })
	mediaStream(t, c, "CA-tls-1", 25) // the socket opened before keeps flowing

	// A pair that does not match: logged, counted, the last good one stays.
	sec.Swap(t, testpki.Pair{CertPEM: ca.Valid(t, "127.0.0.1", "edge.test").CertPEM, KeyPEM: first.KeyPEM})
	testwait.Until(t, 60*time.Second, "the bad pair logged", func() bool {
		return strings.Contains(edge.Log(), "TLS certificate reload failed")
	})
	if got := served("edge.test"); got.Cmp(second.Serial) != 0 {
		t.Errorf("after a bad pair: serial %v, want the last good %v", got, second.Serial)
	}
	metrics := provBody(t, edge.AdminURL+"/metrics")
	for _, want := range []string{
		`edge_tls_reload_errors_total{key="tls",listener="tls"} 1`,
		`edge_tls_reloads_total{listener="tls"} 1`,
		`edge_tls_certificate_expiry_seconds{key="tls.certificates[0]",listener="tls",name="media.test"}`,
		// The wss socket's TLS 1.3 records are the epoll loop's
		// (proxy/internal/tls13/handoff.go), across the rotation too.
		`edge_proxy_relayed_sockets_total{client="tls",relay="epoll"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	mediaStream(t, c, "CA-tls-1", 10)
	c.Close(websocket.StatusNormalClosure, "done")
}

// A bad pair refuses the start, naming the setting and the file.
func TestEdgeRefusesABadCertificateAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	ca := testpki.NewCA(t)
	dir := t.TempDir()
	ec, ek := ca.Issue(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "edge.test").Write(t, dir, "expired")
	gc, _ := ca.Valid(t, "edge.test").Write(t, dir, "good")
	_, ok := ca.Valid(t, "other.test").Write(t, dir, "other")
	cases := map[string]struct {
		cert, key string
		want      []string
	}{
		"expired":    {ec, ek, []string{"tls.cert_file", "expired.crt", "expired at"}},
		"mismatched": {gc, ok, []string{"good.crt", "other.key", "does not match"}},
		"missing":    {filepath.Join(dir, "none.crt"), ek, []string{"tls.cert_file", "none.crt", "no such file"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out := edgetest.Refused(t, edgetest.Options{InheritEnv: true, Args: []string{"--listen-public", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0",
				"--set", "tls.cert_file=" + tc.cert, "--set", "tls.key_file=" + tc.key}}, time.Minute)
			if code == 0 {
				t.Fatalf("edge exited 0 with a bad pair:\n%s", out)
			}
			for _, w := range append(tc.want, "invalid configuration") {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
		})
	}
}

// check-config reads the certificate files as serve would.
func TestCheckConfigReadsTheCertificates(t *testing.T) {
	ca := testpki.NewCA(t)
	c, k := ca.Issue(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "edge.test").Write(t, t.TempDir(), "old")
	var out strings.Builder
	err := checkConfig(context.Background(), []string{"--set", "tls.cert_file=" + c, "--set", "tls.key_file=" + k}, nil, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "tls.cert_file") || !strings.Contains(err.Error(), "old.crt") || !strings.Contains(err.Error(), "expired") {
		t.Errorf("check-config with an expired certificate: %v", err)
	}
}

// admin_tls makes the admin listener speak TLS on its own, with its own
// certificate; the public one stays plain.
func TestAdminListenerTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	ca := testpki.NewCA(t)
	pair := ca.Valid(t, "127.0.0.1")
	c, k := pair.Write(t, t.TempDir(), "admin")
	edge := edgetest.Start(t, []string{"--set", "admin_tls.cert_file=" + c, "--set", "admin_tls.key_file=" + k})
	if !strings.HasPrefix(edge.AdminURL, "https://") || !strings.HasPrefix(edge.PublicURL, "http://") {
		t.Fatalf("admin %s, public %s: want only the admin listener on TLS", edge.AdminURL, edge.PublicURL)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientConfig("")}}
	resp, err := client.Get(edge.AdminURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(pair.Serial) != 0 {
		t.Errorf("admin healthz over TLS: %d, %+v", resp.StatusCode, resp.TLS)
	}
	if provGet(t, edge.PublicURL+"/healthz") != 200 {
		t.Error("the plain public listener does not answer")
	}
}
