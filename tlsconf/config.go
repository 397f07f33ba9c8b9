package tlsconf

import (
	"errors"
	"fmt"

	"github.com/edge-voice/edge/acme"
	"github.com/edge-voice/edge/internal/confcheck"
)

// Config is one listener's TLS settings: the keys tls.* (public listener)
// or admin_tls.* (admin listener). Paths are fixed for the process
// (restart); the files behind them are re-read while edge runs.
type Config struct {
	// CertFile is a PEM certificate chain (leaf first). With KeyFile set the
	// listener speaks only TLS. It is served to clients whose ServerName no
	// pair of Certificates names, and to clients that send none.
	CertFile string `koanf:"cert_file"`
	// KeyFile is CertFile's PEM private key.
	KeyFile string `koanf:"key_file"`
	// Certificates are further pairs, each served to the clients whose
	// ServerName (SNI) one of its DNS names matches (wildcards included).
	Certificates []Pair `koanf:"certificates"`
	// ACME obtains and renews certificates from an ACME CA, stored in Redis
	// and shared by every replica (package acme). Public listener only.
	ACME acme.Config `koanf:"acme"`
}

// DefaultConfig is a listener's TLS defaults: plain HTTP, ACME off.
func DefaultConfig() Config { return Config{ACME: acme.DefaultConfig()} }

// Pair is one certificate chain and its key, both PEM files.
type Pair struct {
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// Enabled reports whether the listener terminates TLS: with certificates
// from files, from ACME, or both.
func (c Config) Enabled() bool { return c.hasFiles() || c.ACME.Enabled }

func (c Config) hasFiles() bool { return c.CertFile != "" || c.KeyFile != "" }

// pairs lists every pair with the key path naming it in errors: the
// default pair first.
func (c Config) pairs(prefix string) []namedPair {
	var out []namedPair
	if c.hasFiles() {
		out = append(out, namedPair{prefix, Pair{c.CertFile, c.KeyFile}})
	}
	for i, p := range c.Certificates {
		out = append(out, namedPair{fmt.Sprintf("%s.certificates[%d]", prefix, i), p})
	}
	return out
}

type namedPair struct {
	path string
	Pair
}

// Validate checks the settings' shape under the key prefix ("tls",
// "admin_tls"): both files of every pair, and no SNI pair without the
// default one. The files themselves are read by New, at start, where a bad
// one refuses the start naming it; a reload of the config file does not
// read them (a rotation half done must not reject unrelated settings).
func (c Config) Validate(prefix string) error {
	var errs []error
	if c.hasFiles() {
		errs = append(errs, bothFiles(prefix, Pair{c.CertFile, c.KeyFile}))
	} else if len(c.Certificates) > 0 && !c.ACME.Enabled {
		errs = append(errs, confcheck.Invalid(prefix+".certificates", len(c.Certificates),
			"needs "+prefix+".cert_file and "+prefix+".key_file, the certificate for clients without a matching ServerName"))
	}
	for i, p := range c.Certificates {
		errs = append(errs, bothFiles(fmt.Sprintf("%s.certificates[%d]", prefix, i), p))
	}
	switch {
	case prefix != "tls" && c.ACME.Enabled:
		errs = append(errs, confcheck.Invalid(prefix+".acme.enabled", true, "ACME serves the public listener only (tls.acme)"))
	case prefix == "tls":
		errs = append(errs, c.ACME.Validate())
	}
	return errors.Join(errs...)
}

func bothFiles(path string, p Pair) error {
	switch {
	case p.CertFile == "" && p.KeyFile == "":
		return fmt.Errorf("%s: cert_file and key_file are empty", path)
	case p.CertFile == "":
		return confcheck.Invalid(path+".cert_file", p.CertFile, "must be set with "+path+".key_file")
	case p.KeyFile == "":
		return confcheck.Invalid(path+".key_file", p.KeyFile, "must be set with "+path+".cert_file")
	}
	return nil
}
