package acme

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// pebble is Let's Encrypt's test CA run in-process on 127.0.0.1 through its
// own packages (what its cmd/pebble main wires), behind a counter of the
// requests edge makes to it.
type pebble struct {
	directory string         // the ACME directory URL
	caFile    string         // PEM of the directory's HTTPS certificate, for tls.acme.ca_file
	roots     *x509.CertPool // Pebble's root, that issued certificates chain to
	orders    atomic.Int64   // new-order requests: one per issuance attempt
	requests  atomic.Int64   // every request
}

type pebbleOpts struct {
	validitySeconds int  // issued certificates' lifetime; 0: Pebble's 90 days
	alwaysValid     bool // PEBBLE_VA_ALWAYS_VALID: no challenge is checked
	tlsPort         int  // where the VA checks tls-alpn-01 (on 127.0.0.1)
	httpPort        int  // where the VA checks http-01 (on 127.0.0.1)
}

func startPebble(t *testing.T, o pebbleOpts) *pebble {
	t.Helper()
	// Pebble reads its knobs from the environment at construction.
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")      // validate at once, not after up to 5s
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0") // no deliberate bad nonces
	t.Setenv("PEBBLE_AUTHZREUSE", "0")      // every order validates
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", "0")
	if o.alwaysValid {
		t.Setenv("PEBBLE_VA_ALWAYS_VALID", "1")
	}
	logger := log.New(io.Discard, "", 0)
	if testing.Verbose() {
		logger = log.New(os.Stderr, "pebble ", log.Lmicroseconds)
	}
	store := db.NewMemoryStore()
	profile := ca.Profile{Description: "test", ValidityPeriod: uint64(o.validitySeconds)}
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": profile})
	validator := va.New(logger, o.httpPort, o.tlsPort, false, startDNS(t), store)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	handler := front.Handler()

	p := &pebble{roots: x509.NewCertPool()}
	p.roots.AddCert(authority.GetRootCert(0).Cert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if r.Method == http.MethodPost && r.URL.Path == "/order-plz" {
			p.orders.Add(1)
		}
		handler.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.directory = srv.URL + wfe.DirectoryPath
	p.caFile = filepath.Join(t.TempDir(), "pebble-ca.pem")
	der := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p.caFile, der, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startDNS answers every A query with 127.0.0.1 (and AAAA with nothing), so
// that Pebble's VA reaches the test's listeners for any test domain. It
// serves TCP, which is what Pebble's VA asks a custom resolver over.
func startDNS(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: l, Net: "tcp", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		a := new(dns.Msg)
		a.SetReply(q)
		for _, qq := range q.Question {
			if qq.Qtype == dns.TypeA {
				a.Answer = append(a.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
					A:   net.IPv4(127, 0, 0, 1),
				})
			}
		}
		w.WriteMsg(a)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return l.Addr().String()
}

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
