package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	xacme "golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// Outcomes callers may branch on.
var (
	// ErrHostNotAllowed: the handshake's server name is not in
	// tls.acme.domains.
	ErrHostNotAllowed = errors.New("acme: host not in tls.acme.domains")
	// ErrRecentFailure: an issuance for the host failed less than the retry
	// backoff ago on some replica; nobody asks the CA again before then.
	ErrRecentFailure = errors.New("acme: issuance failed recently, retry later")
)

const (
	// lockMargin keeps the lock a little past issue_timeout, by when the
	// holder's gate is shut, so that no two replicas ever talk to the CA
	// about one host at once.
	lockMargin = 10 * time.Second
	// retryAfter is how long a failed issuance keeps every replica from the
	// CA for that host (autocert's own is one minute).
	retryAfter = time.Minute
	// checkEvery is how often Run looks for missing or due certificates.
	checkEvery = time.Minute
)

// Manager gives the public listener its ACME certificates: GetCertificate
// for tls.Config, NextProtos for tls-alpn-01, HTTPHandler for http-01 on
// port 80, and Run, which obtains the configured domains' certificates
// ahead of the first handshake and renews them.
type Manager struct {
	cfg       Config
	log       *slog.Logger
	store     *Store
	locks     locks
	met       *metrics
	allowed   map[string]bool
	transport http.RoundTripper
	// serving answers challenges from the store (tls-alpn-01 certificates
	// and http-01 tokens, whichever replica the CA reaches); its gate never
	// opens, so it cannot order anything itself.
	serving *autocert.Manager

	now        func() time.Time
	checkEvery time.Duration
	retryAfter time.Duration
	// observe, when set (tests), sees every certificate this replica starts
	// serving for a host.
	observe func(host string, c *tls.Certificate)

	base     context.Context
	stopBase context.CancelFunc
	flying   sync.WaitGroup

	mu      sync.Mutex
	stopped bool // Run has returned: no new obtains
	certs   map[string]*tls.Certificate
	flights map[string]*flight
	retryAt map[string]time.Time
}

// flight is one obtain of a host's certificate in progress, shared by every
// handshake and check of this replica that needs it.
type flight struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

// New builds the Manager from a valid, enabled cfg. Entries, locks and
// events live in rdb under the keys ks names (allocator.Keys).
func New(cfg Config, rdb redis.UniversalClient, ks Keys, log *slog.Logger, reg prometheus.Registerer) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled {
		return nil, errors.New("tls.acme.enabled: is false")
	}
	transport, err := caTransport(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := keys{ks}
	m := &Manager{
		cfg:        cfg,
		log:        log,
		store:      NewStore(rdb, ks),
		locks:      locks{rdb: rdb, keys: k},
		met:        newMetrics(reg),
		allowed:    map[string]bool{},
		transport:  transport,
		now:        time.Now,
		checkEvery: checkEvery,
		retryAfter: retryAfter,
		certs:      map[string]*tls.Certificate{},
		flights:    map[string]*flight{},
		retryAt:    map[string]time.Time{},
	}
	m.base, m.stopBase = context.WithCancel(context.Background())
	for _, d := range cfg.Domains {
		m.allowed[d] = true
	}
	m.serving = &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      m.store,
		HostPolicy: autocert.HostWhitelist(cfg.Domains...),
		Client: &xacme.Client{
			DirectoryURL: cfg.DirectoryURL,
			HTTPClient:   &http.Client{Transport: &gate{base: transport, refused: m.met.gateRefused.Inc}},
		},
	}
	return m, nil
}

// caTransport trusts the system roots plus the PEM bundle in file.
func caTransport(file string) (http.RoundTripper, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if file == "" {
		return t, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls.acme.ca_file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls.acme.ca_file: %q: no PEM certificate in it", file)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// NextProtos is what the TLS listener must add to its NextProtos:
// "acme-tls/1" when tls-alpn-01 is configured, else nothing.
func (m *Manager) NextProtos() []string {
	if m.cfg.has(TLSALPN01) {
		return []string{xacme.ALPNProto}
	}
	return nil
}

// HTTPHandler answers http-01 challenges from the store on port 80 (the
// CA may reach any replica) and passes every other request to fallback
// (nil: redirect GET and HEAD to https, 400 for the rest).
func (m *Manager) HTTPHandler(fallback http.Handler) http.Handler {
	h := m.serving.HTTPHandler(fallback)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/acme-challenge/") {
			// autocert checks the host policy against r.Host verbatim.
			if host, _, err := net.SplitHostPort(r.Host); err == nil {
				r = r.Clone(r.Context())
				r.Host = host
			}
		}
		h.ServeHTTP(w, r)
	})
}

// isChallenge reports a tls-alpn-01 validation handshake: the CA offers
// "acme-tls/1" and nothing else (RFC 8737 section 3).
func isChallenge(hello *tls.ClientHelloInfo) bool {
	return len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == xacme.ALPNProto
}

// Handles reports whether GetCertificate should answer hello: a
// tls-alpn-01 validation, or a server name in tls.acme.domains. A listener
// that also has certificates from files asks it first, so that neither its
// default certificate nor a file's answers the CA's validation.
func (m *Manager) Handles(hello *tls.ClientHelloInfo) bool {
	return isChallenge(hello) || m.allowed[normalize(hello.ServerName)]
}

// normalize is how a server name is compared with tls.acme.domains.
func normalize(serverName string) string {
	return strings.TrimSuffix(strings.ToLower(serverName), ".")
}

// GetCertificate is the tls.Config hook: challenge certificates from the
// store, a held certificate from memory (renewal starts in the background
// when it is due), else the stored one, else one obtained under the lock,
// waiting at most issue_timeout and the handshake's own deadline.
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if isChallenge(hello) {
		return m.serving.GetCertificate(hello)
	}
	host := normalize(hello.ServerName)
	if !m.allowed[host] {
		m.met.refused.WithLabelValues("host").Inc()
		return nil, fmt.Errorf("%w: %q", ErrHostNotAllowed, host)
	}
	if c, due := m.current(host); c != nil {
		m.met.hits.Inc()
		if due {
			m.kick(host, c)
		}
		return c, nil
	}
	ctx := hello.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.IssueTimeout)
	defer cancel()
	f := m.start(host, nil)
	select {
	case <-f.done:
		if f.err != nil {
			m.met.refused.WithLabelValues("unavailable").Inc()
			return nil, f.err
		}
		return f.cert, nil
	case <-ctx.Done():
		m.met.refused.WithLabelValues("unavailable").Inc()
		return nil, fmt.Errorf("acme certificate for %s: %w", host, ctx.Err())
	}
}

// Run obtains every configured domain's certificate (from the store, or
// the CA under the lock) and renews each when due, until ctx ends. Then it
// abandons obtains in flight and waits for them to return.
func (m *Manager) Run(ctx context.Context) error {
	defer func() {
		m.mu.Lock()
		m.stopped = true
		m.mu.Unlock()
		m.stopBase()
		m.flying.Wait()
	}()
	t := time.NewTicker(m.checkEvery)
	defer t.Stop()
	for {
		m.check()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// check starts an obtain for each domain without a usable certificate and
// a renewal for each whose certificate is due.
func (m *Manager) check() {
	for _, host := range m.cfg.Domains {
		c, _ := m.current(host)
		m.kick(host, c)
	}
}

// current is host's certificate held in memory if still valid, and whether
// it is due for renewal.
func (m *Manager) current(host string) (c *tls.Certificate, due bool) {
	m.mu.Lock()
	c = m.certs[host]
	m.mu.Unlock()
	now := m.now()
	if c == nil || !now.Before(c.Leaf.NotAfter) {
		return nil, false
	}
	return c, m.due(c, now)
}

// due reports a certificate within its renewal window: renew_before, but at
// most half its lifetime, so that short-lived certificates are not renewed
// in a loop.
func (m *Manager) due(c *tls.Certificate, now time.Time) bool {
	window := min(m.cfg.RenewBefore, c.Leaf.NotAfter.Sub(c.Leaf.NotBefore)/2)
	return !now.Before(c.Leaf.NotAfter.Add(-window))
}

// kick starts an obtain (old nil) or renewal in the background unless the
// last one for host failed less than retryAfter ago or one runs already.
func (m *Manager) kick(host string, old *tls.Certificate) {
	if old != nil && !m.due(old, m.now()) {
		return
	}
	m.mu.Lock()
	wait := m.now().Before(m.retryAt[host])
	m.mu.Unlock()
	if !wait {
		m.start(host, old)
	}
}

// start joins host's flight, or starts one.
func (m *Manager) start(host string, old *tls.Certificate) *flight {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.flights[host]; f != nil {
		return f
	}
	f := &flight{done: make(chan struct{})}
	if m.stopped {
		f.err = fmt.Errorf("acme certificate for %s: stopped", host)
		close(f.done)
		return f
	}
	m.flights[host] = f
	m.flying.Add(1)
	go m.fly(host, old, f)
	return f
}

// fly obtains host's certificate detached from the handshake that asked,
// so that a client giving up does not abort an order others wait for.
func (m *Manager) fly(host string, old *tls.Certificate, f *flight) {
	defer m.flying.Done()
	ctx, cancel := context.WithTimeout(m.base, m.cfg.IssueTimeout)
	defer cancel()
	c, err := m.obtain(ctx, host, old)
	m.mu.Lock()
	if c != nil {
		m.certs[host] = c
		m.met.expiry.WithLabelValues(host).Set(float64(c.Leaf.NotAfter.Unix()))
		if m.observe != nil {
			m.observe(host, c)
		}
	}
	if err != nil {
		m.retryAt[host] = m.now().Add(m.retryAfter)
	}
	delete(m.flights, host)
	m.mu.Unlock()
	if err != nil {
		m.log.Error("acme: no certificate", "host", host, "renewal", old != nil, "err", err)
	}
	f.cert, f.err = c, err
	close(f.done)
}
