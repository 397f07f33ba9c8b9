// Package testpebble runs Pebble, Let's Encrypt's test ACME CA, in-process
// on 127.0.0.1 for tests, with a DNS server that resolves every name to
// 127.0.0.1 so that its validator reaches the test's listeners.
package testpebble

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// CA is Let's Encrypt's test CA run in-process on 127.0.0.1 through its
// own packages (what its cmd/pebble main wires), behind a counter of the
// requests made to it.
type CA struct {
	Directory string         // the ACME directory URL
	CAFile    string         // PEM of the directory's HTTPS certificate, for tls.acme.ca_file
	Roots     *x509.CertPool // Pebble's root, that issued certificates chain to
	Orders    atomic.Int64   // new-order requests: one per issuance attempt
	Requests  atomic.Int64   // every request
}

type Opts struct {
	ValiditySeconds int  // issued certificates' lifetime; 0: Pebble's 90 days
	AlwaysValid     bool // PEBBLE_VA_ALWAYS_VALID: no challenge is checked
	TLSPort         int  // where the VA checks tls-alpn-01 (on 127.0.0.1)
	HTTPPort        int  // where the VA checks http-01 (on 127.0.0.1)
}

func Start(t *testing.T, o Opts) *CA {
	t.Helper()
	// Pebble reads its knobs from the environment at construction.
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")      // validate at once, not after up to 5s
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0") // no deliberate bad nonces
	t.Setenv("PEBBLE_AUTHZREUSE", "0")      // every order validates
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", "0")
	if o.AlwaysValid {
		t.Setenv("PEBBLE_VA_ALWAYS_VALID", "1")
	}
	logger := log.New(io.Discard, "", 0)
	if testing.Verbose() {
		logger = log.New(os.Stderr, "pebble ", log.Lmicroseconds)
	}
	store := db.NewMemoryStore()
	profile := ca.Profile{Description: "test", ValidityPeriod: uint64(o.ValiditySeconds)}
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": profile})
	validator := va.New(logger, o.HTTPPort, o.TLSPort, false, startDNS(t), store)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	handler := front.Handler()

	p := &CA{Roots: x509.NewCertPool()}
	p.Roots.AddCert(authority.GetRootCert(0).Cert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Requests.Add(1)
		if r.Method == http.MethodPost && r.URL.Path == "/order-plz" {
			p.Orders.Add(1)
		}
		handler.ServeHTTP(w, r)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.Directory = srv.URL + wfe.DirectoryPath
	p.CAFile = filepath.Join(t.TempDir(), "pebble-ca.pem")
	der := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p.CAFile, der, 0o600); err != nil {
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
