// Package testpki makes a throwaway certificate authority inside a test, and
// certificates it signs written as PEM files, so that TLS tests run real
// handshakes against real files without anything checked in.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	Pool *x509.CertPool // trusts this CA only
	PEM  []byte         // the CA certificate
}

// NewCA makes a CA valid for a day around now.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "edge test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, Pool: pool, PEM: pemBlock("CERTIFICATE", der)}
}

// Pair is a signed certificate and its key, as PEM.
type Pair struct {
	CertPEM, KeyPEM []byte
	Serial          *big.Int
}

// Issue signs a server certificate for names (DNS names, or IP addresses)
// valid from notBefore to notAfter.
func (ca *CA) Issue(t testing.TB, notBefore, notAfter time.Time, names ...string) Pair {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("PRIVATE KEY", kder), Serial: tmpl.SerialNumber}
}

// Valid signs a certificate for names valid for a day around now.
func (ca *CA) Valid(t testing.TB, names ...string) Pair {
	return ca.Issue(t, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), names...)
}

// Write writes p as dir/name.crt and dir/name.key and returns both paths.
func (p Pair) Write(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, p.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, p.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// Secret is a directory laid out like a Kubernetes Secret volume: tls.crt
// and tls.key are symlinks through ..data to a timestamped directory, and
// an update swaps ..data in one rename, as the kubelet (and so
// cert-manager's rotation) does.
type Secret struct {
	Dir string
	n   int
}

// NewSecret makes the volume in a fresh temporary directory holding p.
func NewSecret(t testing.TB, p Pair) *Secret {
	t.Helper()
	s := &Secret{Dir: t.TempDir()}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(s.Dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	s.Swap(t, p)
	return s
}

// CertFile and KeyFile are the paths edge is configured with.
func (s *Secret) CertFile() string { return filepath.Join(s.Dir, "tls.crt") }
func (s *Secret) KeyFile() string  { return filepath.Join(s.Dir, "tls.key") }

// Swap writes p into a new directory and points ..data at it atomically.
func (s *Secret) Swap(t testing.TB, p Pair) {
	t.Helper()
	s.n++
	ts := filepath.Join(s.Dir, "..data_"+time.Now().Format("2006_01_02_15_04_05.000000000")+"_"+big.NewInt(int64(s.n)).String())
	if err := os.Mkdir(ts, 0o700); err != nil {
		t.Fatal(err)
	}
	p.Write(t, ts, "tls")
	tmp := filepath.Join(s.Dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.Dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// ClientConfig trusts only ca and asks for serverName.
func (ca *CA) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
