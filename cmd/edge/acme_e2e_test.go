package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testpebble"
	"github.com/edge-voice/edge/internal/testredis"
)

// TestEdgeObtainsACMECertificate runs two real edge replicas on one real
// Redis with tls.acme pointed at Pebble (Let's Encrypt's test CA), which
// validates tls-alpn-01 against the first replica's public listener: a
// handshake gets a certificate chained to Pebble's root, and the second
// replica serves the same certificate from Redis without asking the CA.
func TestEdgeObtainsACMECertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	const domain = "voice.edge.test"
	rs := testredis.Start(t, testredis.TCP())
	// Pebble's validator dials a port fixed when it is made; edge binds
	// its own, so a forwarder on a port known first joins the two.
	fwd, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	var target atomic.Value // the first replica's public address
	go forward(fwd, func() string { s, _ := target.Load().(string); return s })
	ca := testpebble.Start(t, testpebble.Opts{TLSPort: fwd.Addr().(*net.TCPAddr).Port})

	cfg := edgetest.WriteFile(t, "edge.yaml", fmt.Sprintf(`
redis: {url: %q}
tls:
  acme:
    enabled: true
    domains: [%s]
    directory_url: %q
    ca_file: %q
`, rs.URL(), domain, ca.Directory, ca.CAFile))
	first := edgetest.Start(t, []string{"--config", cfg})
	target.Store(strings.TrimPrefix(first.PublicURL, "https://"))

	served := func(p *edgetest.Process) string {
		t.Helper()
		d := &net.Dialer{Timeout: 90 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", strings.TrimPrefix(p.PublicURL, "https://"),
			&tls.Config{ServerName: domain, RootCAs: ca.Roots, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatalf("handshake for %s: %v\nedge log:\n%s", domain, err, p.Log())
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	serial := served(first)
	if n := ca.Orders.Load(); n != 1 {
		t.Fatalf("%d orders at the CA for the first certificate, want 1", n)
	}

	second := edgetest.Start(t, []string{"--config", cfg})
	if got := served(second); got != serial {
		t.Fatalf("second replica serves serial %s, want the shared %s", got, serial)
	}
	if n := ca.Orders.Load(); n != 1 {
		t.Errorf("%d orders at the CA after the second replica started, want still 1", n)
	}
	if !strings.Contains(provBody(t, second.AdminURL+"/metrics"), "edge_acme_certificate_expiry_timestamp_seconds") {
		t.Error("the second replica exports no ACME certificate expiry")
	}
}

// forward pipes every connection on l to the address target names then.
func forward(l net.Listener, target func() string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", target())
			if err != nil {
				return
			}
			defer u.Close()
			go io.Copy(u, c)
			io.Copy(c, u)
		}()
	}
}
