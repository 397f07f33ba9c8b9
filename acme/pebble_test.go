package acme

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// listen reserves a loopback port for a listener the VA must reach, before
// Pebble is told the port.
func listen(t *testing.T) (net.Listener, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	n, _ := strconv.Atoi(port)
	return l, n
}

// serveTLS serves TLS on l with m's certificates, as edge's public listener
// does once wired (GetCertificate plus NextProtos), answering "ok".
func serveTLS(t *testing.T, l net.Listener, m *Manager) string {
	t.Helper()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: m.GetCertificate,
			NextProtos:     append([]string{"http/1.1"}, m.NextProtos()...),
		},
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go srv.ServeTLS(l, "", "")
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// handshake opens a TLS connection to addr for host, verifying the chain
// against Pebble's root, and returns the leaf.
func handshake(t *testing.T, addr, host string, roots *x509.CertPool) (*x509.Certificate, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: host, RootCAs: roots, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

func serial(c *x509.Certificate) string { return strings.ToLower(c.SerialNumber.Text(16)) }
