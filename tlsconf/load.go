package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"time"
)

// loaded is one pair as last read: its certificate and the hash of both
// files' bytes, so a poll that reads the same bytes does nothing.
type loaded struct {
	cert *tls.Certificate
	sum  [sha256.Size]byte
}

// readPair reads both files of p. The error names the file at fault.
func readPair(p namedPair) (certPEM, keyPEM []byte, sum [sha256.Size]byte, err error) {
	if certPEM, err = os.ReadFile(p.CertFile); err != nil {
		return nil, nil, sum, fmt.Errorf("%s.cert_file: %w", p.path, err)
	}
	if keyPEM, err = os.ReadFile(p.KeyFile); err != nil {
		return nil, nil, sum, fmt.Errorf("%s.key_file: %w", p.path, err)
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	copy(sum[:], h.Sum(nil))
	return certPEM, keyPEM, sum, nil
}

// parsePair turns the bytes into a certificate edge can serve: the key
// matches the leaf, and the leaf is valid at now (an expired certificate
// would fail every handshake; refusing it keeps the last good one).
func parsePair(p namedPair, certPEM, keyPEM []byte, now time.Time) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair says which half is wrong ("failed to find any PEM
		// data in key input", "private key does not match public key");
		// both files are named since a mismatch is either's fault.
		return nil, fmt.Errorf("%s: %s and %s: %w", p.path, p.CertFile, p.KeyFile, err)
	}
	leaf := cert.Leaf // set by X509KeyPair (Go 1.23+)
	if leaf == nil {
		return nil, fmt.Errorf("%s.cert_file: %s: no leaf certificate", p.path, p.CertFile)
	}
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("%s.cert_file: %s: certificate %s expired at %s", p.path, p.CertFile,
			certName(&cert), leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("%s.cert_file: %s: certificate %s is not valid before %s", p.path, p.CertFile,
			certName(&cert), leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &cert, nil
}

// loadPair reads and parses p.
func loadPair(p namedPair, now time.Time) (loaded, error) {
	certPEM, keyPEM, sum, err := readPair(p)
	if err != nil {
		return loaded{}, err
	}
	cert, err := parsePair(p, certPEM, keyPEM, now)
	if err != nil {
		return loaded{}, err
	}
	return loaded{cert: cert, sum: sum}, nil
}

// certName is the name a certificate is known by in logs and metrics: its
// first DNS name, else its subject's common name.
func certName(c *tls.Certificate) string {
	if c.Leaf == nil {
		return ""
	}
	if len(c.Leaf.DNSNames) > 0 {
		return c.Leaf.DNSNames[0]
	}
	if c.Leaf.Subject.CommonName != "" {
		return c.Leaf.Subject.CommonName
	}
	return c.Leaf.SerialNumber.String()
}

// errNoCertificate is the handshake error when nothing can serve a
// ServerName: no pair matches, no default pair, no fallback.
var errNoCertificate = errors.New("tls: no certificate for this server name")
