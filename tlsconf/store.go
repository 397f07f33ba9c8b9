package tlsconf

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Store serves one listener's certificates and keeps them current. Run
// polls the files every interval; a pair whose bytes changed is parsed and,
// if good, replaces the old one for new handshakes (open connections keep
// the keys they agreed). A bad read or parse keeps the last good
// certificate, logs an ERROR once per distinct problem and counts
// edge_tls_reload_errors_total.
type Store struct {
	// Fallback, when set, is asked for a ServerName that no file pair
	// names, before the default pair: the seam for a second certificate
	// source such as an ACME manager. A nil certificate with a nil error
	// means "not mine". Set it before the listener serves.
	Fallback func(*tls.ClientHelloInfo) (*tls.Certificate, error)

	prefix   string
	pairs    []namedPair
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time
	m        *metrics

	// set is what handshakes read; Run's goroutine replaces it whole.
	set atomic.Pointer[certSet]
	// Owned by Run's goroutine.
	cur     []loaded
	lastErr []string
}

// ALPNACME is the ALPN protocol of ACME's TLS-ALPN-01 challenge (RFC
// 8737): offered with it, a handshake goes to Fallback first.
const ALPNACME = "acme-tls/1"

// certSet is an immutable snapshot: every pair's certificate and an index
// of their DNS names.
type certSet struct {
	certs  []*tls.Certificate // by pair; [0] the default
	byName map[string]*tls.Certificate
}

// New reads every pair of cfg now: a missing, unreadable, mismatched,
// expired or not yet valid pair is an error naming its key and file, so a
// bad pair refuses the start. prefix is the settings' key ("tls").
// interval is how often Run polls the files. reg may be nil.
func New(cfg Config, prefix string, interval time.Duration, log *slog.Logger, reg prometheus.Registerer) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{prefix: prefix, pairs: cfg.pairs(prefix), interval: interval, log: log, now: time.Now}
	var errs []error
	for _, p := range s.pairs {
		l, err := loadPair(p, s.now())
		errs = append(errs, err)
		s.cur = append(s.cur, l)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.lastErr = make([]string, len(s.pairs))
	s.publish()
	s.m = newMetrics(s, reg)
	// Every pair's error series exists at 0 from the start: increase()
	// over a series born at 1 on the first failure never rises.
	for _, p := range s.pairs {
		s.m.errors.WithLabelValues(p.path)
	}
	return s, nil
}

// GetCertificate picks the certificate for a handshake (tls.Config's
// GetCertificate): a file pair naming the ServerName, else Fallback's,
// else the default pair.
func (s *Store) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	set := s.set.Load()
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	// An ACME CA validating TLS-ALPN-01 (RFC 8737) must get the challenge
	// certificate, which only the fallback has, even for a name a file
	// pair also holds.
	if s.Fallback != nil && slices.Contains(hello.SupportedProtos, ALPNACME) {
		return s.Fallback(hello)
	}
	if c := set.match(name); c != nil {
		return c, nil
	}
	if s.Fallback != nil && name != "" {
		c, err := s.Fallback(hello)
		if c != nil || err != nil {
			return c, err
		}
	}
	if len(set.certs) > 0 {
		return set.certs[0], nil
	}
	return nil, errNoCertificate
}

// match finds the pair naming name exactly, else by a wildcard for its
// first label (RFC 6125 6.4.3: "*" stands for one whole label).
func (cs *certSet) match(name string) *tls.Certificate {
	if name == "" {
		return nil
	}
	if c := cs.byName[name]; c != nil {
		return c
	}
	if _, rest, ok := strings.Cut(name, "."); ok {
		return cs.byName["*."+rest]
	}
	return nil
}

// Run polls the files until ctx ends, then returns nil.
func (s *Store) Run(ctx context.Context) error {
	if len(s.pairs) == 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.poll()
		}
	}
}

// poll re-reads every pair and publishes a new set if one changed.
func (s *Store) poll() {
	changed := false
	for i, p := range s.pairs {
		certPEM, keyPEM, sum, err := readPair(p)
		if err == nil && sum == s.cur[i].sum {
			s.lastErr[i] = ""
			continue
		}
		var cert *tls.Certificate
		if err == nil {
			cert, err = parsePair(p, certPEM, keyPEM, s.now())
		}
		if err != nil {
			s.reject(i, err)
			continue
		}
		s.cur[i] = loaded{cert: cert, sum: sum}
		s.lastErr[i] = ""
		changed = true
		s.m.reloads.Inc()
		s.log.Info("TLS certificate reloaded", "key", p.path, "file", p.CertFile, "name", certName(cert),
			"not_after", cert.Leaf.NotAfter.UTC())
	}
	if changed {
		s.publish()
	}
}

// reject keeps pair i's last good certificate. The same problem is logged
// and counted once, not on every tick: a half-written rotation or a
// deleted file would otherwise flood the log.
func (s *Store) reject(i int, err error) {
	if msg := err.Error(); msg != s.lastErr[i] {
		s.lastErr[i] = msg
		s.m.errors.WithLabelValues(s.pairs[i].path).Inc()
		s.log.Error("TLS certificate reload failed, keeping the last good certificate",
			"key", s.pairs[i].path, "err", err)
	}
}

// publish builds a new snapshot from cur. An earlier pair keeps a name
// that a later one repeats: the default pair, then the list in order.
func (s *Store) publish() {
	set := &certSet{byName: map[string]*tls.Certificate{}}
	for _, l := range s.cur {
		set.certs = append(set.certs, l.cert)
		for _, n := range names(l.cert) {
			if _, ok := set.byName[n]; !ok {
				set.byName[n] = l.cert
			}
		}
	}
	s.set.Store(set)
}

// names are the DNS names a certificate answers for, lower-case; the
// common name only when it has none (legacy certificates).
func names(c *tls.Certificate) []string {
	var out []string
	for _, n := range c.Leaf.DNSNames {
		if n = strings.ToLower(n); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 && c.Leaf.Subject.CommonName != "" {
		out = append(out, strings.ToLower(c.Leaf.Subject.CommonName))
	}
	return out
}
