package acme

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"golang.org/x/crypto/acme/autocert"

	"github.com/edge-voice/edge/internal/confcheck"
)

// Challenge types autocert can answer.
const (
	// TLSALPN01 is answered on the public TLS listener itself: the listener
	// must offer the "acme-tls/1" protocol (NextProtos). RFC 8737.
	TLSALPN01 = "tls-alpn-01"
	// HTTP01 is answered on port 80 by HTTPHandler. RFC 8555 section 8.3.
	HTTP01 = "http-01"
)

// LetsEncrypt is the default directory: Let's Encrypt's production CA.
const LetsEncrypt = autocert.DefaultACMEDirectory

// maxIssueTimeout is autocert's own bound on one GetCertificate (5 min):
// a longer issue_timeout would only hold the lock past the engine's end.
const maxIssueTimeout = 5 * time.Minute

// Config is the ACME section of edge's configuration (keys tls.acme.*).
// Everything is read once at start (restart to change it).
type Config struct {
	// Enabled turns ACME on. Default false: certificates come from files
	// or from a load balancer in front of edge.
	Enabled bool `koanf:"enabled"`
	// Domains is the allow-list of host names edge obtains certificates
	// for (autocert's host policy). A handshake for any other name is
	// refused before the CA or Redis is asked, so that clients cannot make
	// edge spend the CA's rate limit on names it does not own. Required
	// when enabled; no wildcards (they need dns-01).
	Domains []string `koanf:"domains"`
	// Email is the contact the CA writes to about expiring or revoked
	// certificates. Optional, recommended.
	Email string `koanf:"email"`
	// DirectoryURL is the CA's ACME directory. Default Let's Encrypt's
	// production directory; its staging directory is
	// https://acme-staging-v02.api.letsencrypt.org/directory.
	DirectoryURL string `koanf:"directory_url"`
	// CAFile is a PEM bundle of roots trusted for the CA's own HTTPS, in
	// addition to the system roots: for a private ACME CA (step-ca, Pebble).
	// Empty: system roots only.
	CAFile string `koanf:"ca_file"`
	// RenewBefore is how long before expiry a certificate is renewed.
	// Default 720h (30 days: Let's Encrypt's certificates live 90).
	RenewBefore time.Duration `koanf:"renew_before"`
	// Challenges are the challenge types edge answers. Default
	// ["tls-alpn-01"], which needs nothing but the public listener on 443.
	// With "http-01" edge also answers on the port-80 handler; autocert
	// always tries tls-alpn-01 first when both are listed.
	Challenges []string `koanf:"challenges"`
	// HTTPListen is where edge answers http-01 challenges (HTTPHandler),
	// used only when Challenges has "http-01": the CA always connects to
	// port 80, so this is ":80" unless a Service maps 80 to it. Every other
	// request on it is redirected to https. Default ":80".
	HTTPListen string `koanf:"http_listen"`
	// IssueTimeout bounds one issuance (order, validation, download) and so
	// the issuance lock's lifetime and how long other replicas and waiting
	// handshakes wait for it. Default 2m, at most 5m.
	IssueTimeout time.Duration `koanf:"issue_timeout"`
}

// DefaultConfig is ACME's defaults (disabled).
func DefaultConfig() Config {
	return Config{
		DirectoryURL: LetsEncrypt,
		RenewBefore:  30 * 24 * time.Hour,
		Challenges:   []string{TLSALPN01},
		HTTPListen:   ":80",
		IssueTimeout: 2 * time.Minute,
	}
}

// Validate checks the settings when ACME is enabled (a disabled section is
// not read). Errors name the key: tls.acme.domains[1]: ...
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	const p = "tls.acme."
	var errs []error
	if len(c.Domains) == 0 {
		errs = append(errs, errors.New(p+"domains: must list the host names to obtain certificates for"))
	}
	seen := map[string]bool{}
	for i, d := range c.Domains {
		path := fmt.Sprintf("%sdomains[%d]", p, i)
		if err := validateDomain(d); err != nil {
			errs = append(errs, confcheck.Invalid(path, d, err.Error()))
			continue
		}
		if seen[d] {
			errs = append(errs, confcheck.Invalid(path, d, "is listed twice"))
		}
		seen[d] = true
	}
	if c.Email != "" && (strings.ContainsAny(c.Email, " \t\r\n,<>") || strings.HasPrefix(c.Email, "mailto:") ||
		strings.Count(c.Email, "@") != 1 || strings.HasPrefix(c.Email, "@") || strings.HasSuffix(c.Email, "@")) {
		errs = append(errs, confcheck.Invalid(p+"email", c.Email, "must be a plain address like ops@example.com"))
	}
	errs = append(errs, validateDirectory(c.DirectoryURL))
	errs = append(errs, confcheck.Positive(p+"renew_before", c.RenewBefore))
	errs = append(errs, confcheck.Positive(p+"issue_timeout", c.IssueTimeout))
	if c.IssueTimeout > maxIssueTimeout {
		errs = append(errs, confcheck.Invalid(p+"issue_timeout", c.IssueTimeout, "must be <= 5m (autocert's own bound on one issuance)"))
	}
	errs = append(errs, validateChallenges(c.Challenges))
	if c.has(HTTP01) {
		_, _, err := confcheck.HostPort(p+"http_listen", c.HTTPListen, 0)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateDomain accepts lower-case DNS names of two labels or more: the
// form autocert compares SNI against after lower-casing it.
func validateDomain(d string) error {
	switch {
	case d == "":
		return errors.New("must not be empty")
	case strings.HasPrefix(d, "*."):
		return errors.New("wildcards need the dns-01 challenge, which edge does not answer")
	case d != strings.ToLower(d):
		return errors.New("must be lower case")
	case len(d) > 253:
		return errors.New("is longer than 253 bytes")
	}
	if _, err := netip.ParseAddr(d); err == nil {
		return errors.New("must be a host name, not an IP address")
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return errors.New("must have at least two labels (autocert refuses single-label names)")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return errors.New("has an empty, too long or hyphen-edged label")
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return errors.New("must be ASCII letters, digits and hyphens (punycode for IDNs)")
			}
		}
	}
	return nil
}

func validateDirectory(s string) error {
	const path = "tls.acme.directory_url"
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %q: not a URL", path, s)
	case u.Scheme != "https" || u.Host == "":
		return confcheck.Invalid(path, s, "must be an https:// URL (RFC 8555 requires HTTPS)")
	case u.User != nil:
		return confcheck.Invalid(path, u.Redacted(), "must not carry user info")
	}
	return nil
}

func validateChallenges(cs []string) error {
	const path = "tls.acme.challenges"
	if len(cs) == 0 {
		return fmt.Errorf("%s: must list %q and/or %q", path, TLSALPN01, HTTP01)
	}
	seen := map[string]bool{}
	for i, c := range cs {
		if c != TLSALPN01 && c != HTTP01 {
			return confcheck.Invalid(fmt.Sprintf("%s[%d]", path, i), c, fmt.Sprintf("must be %q or %q", TLSALPN01, HTTP01))
		}
		if seen[c] {
			return confcheck.Invalid(fmt.Sprintf("%s[%d]", path, i), c, "is listed twice")
		}
		seen[c] = true
	}
	return nil
}

// has reports whether the challenge type is configured.
func (c Config) has(challenge string) bool {
	for _, x := range c.Challenges {
		if x == challenge {
			return true
		}
	}
	return false
}
