package acme

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	xacme "golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// errGateClosed is what an autocert.Manager gets when it tries to reach the
// CA without this replica holding the host's lock.
var errGateClosed = errors.New("acme: CA contact outside this replica's issuance lock refused")

// gate is the CA transport of one autocert.Manager: open until a deadline
// (the lock's end) or until closed. autocert starts renewal timers and
// deactivation goroutines of its own that would reach the CA at any time
// from any replica; through a closed gate they cannot.
type gate struct {
	base    http.RoundTripper
	refused func() // counts refusals (nil: not counted)

	mu    sync.Mutex
	until time.Time
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	g.mu.Lock()
	open := time.Now().Before(g.until)
	g.mu.Unlock()
	if !open {
		if g.refused != nil {
			g.refused()
		}
		return nil, errGateClosed
	}
	return g.base.RoundTrip(r)
}

func (g *gate) close() {
	g.mu.Lock()
	g.until = time.Time{}
	g.mu.Unlock()
}

// issuingCache is the store as one issuance sees it: while the issuance
// runs, the host's own certificate is hidden, so that the fresh
// autocert.Manager orders a new one even when a still-valid certificate due
// for renewal is stored; and the result of storing the new one is kept,
// because autocert ignores it. Once revealed, the Manager's leftover renewal
// timer finds the certificates edge keeps renewing and adopts them instead
// of knocking at the closed gate.
type issuingCache struct {
	autocert.Cache
	host string

	mu       sync.Mutex
	revealed bool
	stored   bool
	putErr   error
}

func (c *issuingCache) Get(ctx context.Context, name string) ([]byte, error) {
	c.mu.Lock()
	hide := !c.revealed && (name == c.host || name == c.host+"+rsa")
	c.mu.Unlock()
	if hide {
		return nil, autocert.ErrCacheMiss
	}
	return c.Cache.Get(ctx, name)
}

func (c *issuingCache) reveal() {
	c.mu.Lock()
	c.revealed = true
	c.mu.Unlock()
}

func (c *issuingCache) Put(ctx context.Context, name string, data []byte) error {
	err := c.Cache.Put(ctx, name, data)
	if name == c.host {
		c.mu.Lock()
		c.stored, c.putErr = err == nil, err
		c.mu.Unlock()
	}
	return err
}

// ecdsaHello is the ClientHello the engine is asked with: edge obtains only
// ECDSA P-256 certificates (every client of the public listener, which
// requires TLS 1.2 and modern suites, supports them), so one key per host.
func ecdsaHello(host string) *tls.ClientHelloInfo {
	return &tls.ClientHelloInfo{
		ServerName:       host,
		SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
		SupportedCurves:  []tls.CurveID{tls.CurveP256},
		CipherSuites:     []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
	}
}

// issue orders a certificate for host from the CA and stores it. The
// caller holds host's lock until deadline; the engine is a fresh
// autocert.Manager (its state is empty, so it orders) whose gate shuts at
// deadline and when issue returns, whatever autocert still runs. autocert
// cannot be stopped: each engine leaves one renewal timer behind, a few
// bytes per issuance, which reads the store when it fires.
func (m *Manager) issue(ctx context.Context, host string, deadline time.Time) (*tls.Certificate, error) {
	g := &gate{base: m.transport, until: deadline, refused: m.met.gateRefused.Inc}
	view := &issuingCache{Cache: m.store, host: host}
	// The gate shuts before the store shows through: autocert's renewal
	// timer must never find a due certificate with the gate still open.
	defer view.reveal()
	defer g.close()
	eng := &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      view,
		HostPolicy: autocert.HostWhitelist(host),
		Email:      m.cfg.Email,
		Client: &xacme.Client{
			DirectoryURL: m.cfg.DirectoryURL,
			HTTPClient:   &http.Client{Transport: g},
			UserAgent:    "edge",
		},
	}
	if m.cfg.has(HTTP01) {
		eng.HTTPHandler(nil) // only to turn http-01 on: the serving Manager answers it
	}
	type result struct {
		c   *tls.Certificate
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := eng.GetCertificate(ecdsaHello(host))
		done <- result{c, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		return nil, fmt.Errorf("acme issue %s: %w", host, ctx.Err())
	}
	if r.err != nil {
		return nil, fmt.Errorf("acme issue %s: %w", host, r.err)
	}
	view.mu.Lock()
	stored, putErr := view.stored, view.putErr
	view.mu.Unlock()
	if !stored {
		// Other replicas would never find it: treat it as a failure.
		return nil, fmt.Errorf("acme issue %s: store certificate: %w", host, errors.Join(putErr, errors.New("not stored")))
	}
	return r.c, nil
}
