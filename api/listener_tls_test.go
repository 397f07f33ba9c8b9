package api_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/internal/testpki"
	"github.com/edge-voice/edge/tlsconf"
)

// startTLSListener runs a public listener terminating TLS with a
// certificate for 127.0.0.1 signed by ca.
func startTLSListener(t *testing.T, ca *testpki.CA, reg prometheus.Registerer) string {
	t.Helper()
	cfg := tlsconf.Config{}
	cfg.CertFile, cfg.KeyFile = ca.Valid(t, "127.0.0.1").Write(t, t.TempDir(), "edge")
	store, err := tlsconf.New(cfg, "tls", time.Hour, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &api.Surface{
		Handlers:    &api.Handlers{Log: slog.New(slog.DiscardHandler)},
		Ready:       &api.Readiness{},
		BodyTimeout: func() time.Duration { return time.Minute },
	}
	ln, err := api.NewListener("public", "127.0.0.1:0", s.Public(), api.ListenerConfig{
		ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, TLS: store.ServerConfig(),
	}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ln.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr()
}

// With TLS configured the public listener answers https, and a client
// speaking plain HTTP to it is told so instead of seeing garbage or a
// silent close.
func TestTLSListenerServesHTTPSAndTellsPlainHTTPClients(t *testing.T) {
	ca := testpki.NewCA(t)
	reg := prometheus.NewRegistry()
	addr := startTLSListener(t, ca, reg)

	tr := &http.Transport{TLSClientConfig: ca.ClientConfig("127.0.0.1")}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("https request: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 {
		t.Fatalf("https healthz: %d, TLS %+v", resp.StatusCode, resp.TLS)
	}
	// The connection table follows TLS connections: the keep-alive one is
	// counted while it idles, and leaves when it closes.
	waitGauge(t, reg, "edge_http_connections", 1)
	tr.CloseIdleConnections()
	waitGauge(t, reg, "edge_http_connections", 0)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	plain, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("plain HTTP to the TLS port: no answer: %v", err)
	}
	body, _ := io.ReadAll(plain.Body)
	if plain.StatusCode != 400 || !strings.Contains(string(body), "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the TLS port: %d %q", plain.StatusCode, body)
	}
}

// waitGauge waits for an unlabelled-by-us gauge to reach want: connection
// state changes reach the table on the server's goroutines.
func waitGauge(t *testing.T, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	var got float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				got = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if got == want {
			return
		}
	}
	t.Fatalf("%s = %v, want %v", name, got, want)
}
