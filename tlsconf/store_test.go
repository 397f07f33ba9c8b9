package tlsconf

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/edge-voice/edge/internal/testpki"
)

// handshake runs a real TLS handshake against s over an in-memory pipe and
// returns the serial number of the certificate the client was shown.
func handshake(t *testing.T, s *Store, ca *testpki.CA, serverName string) *big.Int {
	t.Helper()
	cc, sc := netPipe()
	srv := tls.Server(sc, s.ServerConfig())
	go func() { srv.Handshake(); srv.Close() }()
	cfg := ca.ClientConfig(serverName)
	if serverName == "" {
		// No SNI: verify against the default certificate's name by hand.
		cfg.InsecureSkipVerify = true
	}
	cl := tls.Client(cc, cfg)
	defer cl.Close()
	cl.SetDeadline(time.Now().Add(10 * time.Second))
	if err := cl.Handshake(); err != nil {
		t.Fatalf("handshake for %q: %v", serverName, err)
	}
	return cl.ConnectionState().PeerCertificates[0].SerialNumber
}

func TestSNIPicksThePairNamingTheServer(t *testing.T) {
	ca := testpki.NewCA(t)
	dir := t.TempDir()
	def := ca.Valid(t, "edge.example.com")
	api := ca.Valid(t, "api.example.net")
	wild := ca.Valid(t, "*.tenants.example.org")
	cfg := Config{}
	cfg.CertFile, cfg.KeyFile = def.Write(t, dir, "default")
	p1c, p1k := api.Write(t, dir, "api")
	p2c, p2k := wild.Write(t, dir, "wild")
	cfg.Certificates = []Pair{{p1c, p1k}, {p2c, p2k}}
	s, err := New(cfg, "tls", time.Hour, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		name string
		want *big.Int
	}{
		"default by name":       {"edge.example.com", def.Serial},
		"extra pair by name":    {"api.example.net", api.Serial},
		"case and trailing dot": {"API.example.net.", api.Serial},
		"wildcard":              {"acme.tenants.example.org", wild.Serial},
		"no SNI gets default":   {"", def.Serial},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := handshake(t, s, ca, tc.name); got.Cmp(tc.want) != 0 {
				t.Errorf("served serial %v, want %v", got, tc.want)
			}
		})
	}
	// An unknown name gets the default (whose name the client then rejects).
	if c, err := s.GetCertificate(&tls.ClientHelloInfo{ServerName: "other.example.com"}); err != nil || c.Leaf.SerialNumber.Cmp(def.Serial) != 0 {
		t.Errorf("unknown name: got %v, %v; want the default pair", c, err)
	}
	// A wildcard stands for one label only.
	if c := s.set.Load().match("a.b.tenants.example.org"); c != nil {
		t.Errorf("wildcard matched two labels")
	}
}

func TestFallbackServesNamesNoPairHas(t *testing.T) {
	ca := testpki.NewCA(t)
	def := ca.Valid(t, "edge.example.com")
	acme := ca.Valid(t, "acme.example.com")
	acmeCert, err := tls.X509KeyPair(acme.CertPEM, acme.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{}
	cfg.CertFile, cfg.KeyFile = def.Write(t, t.TempDir(), "d")
	s, err := New(cfg, "tls", time.Hour, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	s.Fallback = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		asked = append(asked, h.ServerName)
		if h.ServerName == "acme.example.com" {
			return &acmeCert, nil
		}
		return nil, nil
	}
	if got := handshake(t, s, ca, "acme.example.com"); got.Cmp(acme.Serial) != 0 {
		t.Errorf("fallback name: served %v, want the fallback's %v", got, acme.Serial)
	}
	if got := handshake(t, s, ca, "edge.example.com"); got.Cmp(def.Serial) != 0 {
		t.Errorf("file name: served %v, want the file's %v", got, def.Serial)
	}
	c, err := s.GetCertificate(&tls.ClientHelloInfo{ServerName: "nobody.example.com"})
	if err != nil || c.Leaf.SerialNumber.Cmp(def.Serial) != 0 {
		t.Errorf("a name the fallback declines: got %v, %v; want the default", c, err)
	}
	if strings.Join(asked, ",") != "acme.example.com,nobody.example.com" {
		t.Errorf("fallback asked for %v; a name a file pair holds must not reach it", asked)
	}
	// A TLS-ALPN-01 validation goes to the fallback even for a file's name.
	c, err = s.GetCertificate(&tls.ClientHelloInfo{ServerName: "edge.example.com", SupportedProtos: []string{ALPNACME}})
	if err != nil || c != nil || asked[len(asked)-1] != "edge.example.com" {
		t.Errorf("acme-tls/1 hello: got %v, %v, asked %v; want the fallback's answer", c, err, asked)
	}
}

func TestStartRefusesABadPairNamingTheFile(t *testing.T) {
	ca := testpki.NewCA(t)
	dir := t.TempDir()
	good := ca.Valid(t, "edge.example.com")
	other := ca.Valid(t, "other.example.com")
	expired := ca.Issue(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), "old.example.com")
	future := ca.Issue(t, time.Now().Add(time.Hour), time.Now().Add(48*time.Hour), "soon.example.com")
	gc, gk := good.Write(t, dir, "good")
	oc, _ := other.Write(t, dir, "other")
	ec, ek := expired.Write(t, dir, "expired")
	fc, fk := future.Write(t, dir, "future")
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not pem"), 0o600)
	unreadable := filepath.Join(dir, "unreadable.key")
	os.WriteFile(unreadable, good.KeyPEM, 0o000)

	cases := map[string]struct {
		cfg  Config
		want []string
	}{
		"missing cert":    {Config{CertFile: filepath.Join(dir, "nope.crt"), KeyFile: gk}, []string{"tls.cert_file", "nope.crt", "no such file"}},
		"missing key":     {Config{CertFile: gc, KeyFile: filepath.Join(dir, "nope.key")}, []string{"tls.key_file", "nope.key"}},
		"mismatched pair": {Config{CertFile: oc, KeyFile: gk}, []string{"tls:", "other.crt", "good.key", "does not match"}},
		"expired":         {Config{CertFile: ec, KeyFile: ek}, []string{"tls.cert_file", "expired.crt", "expired at"}},
		"not yet valid":   {Config{CertFile: fc, KeyFile: fk}, []string{"tls.cert_file", "future.crt", "not valid before"}},
		"not PEM":         {Config{CertFile: junk, KeyFile: gk}, []string{"junk.pem"}},
		"bad extra pair":  {Config{CertFile: gc, KeyFile: gk, Certificates: []Pair{{ec, ek}}}, []string{"tls.certificates[0].cert_file", "expired.crt"}},
	}
	if os.Getuid() != 0 { // root reads a 0000 file
		cases["unreadable key"] = struct {
			cfg  Config
			want []string
		}{Config{CertFile: gc, KeyFile: unreadable}, []string{"tls.key_file", "unreadable.key", "permission denied"}}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.cfg, "tls", time.Hour, nil, nil)
			if err == nil {
				t.Fatal("New accepted a bad pair")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestRotationBySymlinkSwapAndBadFilesKeepTheLastGood(t *testing.T) {
	ca := testpki.NewCA(t)
	first := ca.Valid(t, "edge.example.com")
	sec := testpki.NewSecret(t, first)
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	s, err := New(Config{CertFile: sec.CertFile(), KeyFile: sec.KeyFile()}, "tls", time.Hour,
		slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := handshake(t, s, ca, "edge.example.com"); got.Cmp(first.Serial) != 0 {
		t.Fatalf("served %v, want %v", got, first.Serial)
	}

	second := ca.Valid(t, "edge.example.com")
	sec.Swap(t, second)
	s.poll()
	if got := handshake(t, s, ca, "edge.example.com"); got.Cmp(second.Serial) != 0 {
		t.Fatalf("after the swap served %v, want the new %v", got, second.Serial)
	}
	if n := counter(t, s.m.reloads); n != 1 {
		t.Errorf("edge_tls_reloads_total = %v, want 1", n)
	}

	// A swap to a key that does not match, then to an expired pair: both
	// kept out, each logged and counted once however often it is polled.
	mismatched := testpki.Pair{CertPEM: ca.Valid(t, "edge.example.com").CertPEM, KeyPEM: first.KeyPEM}
	sec.Swap(t, mismatched)
	s.poll()
	s.poll()
	sec.Swap(t, ca.Issue(t, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Minute), "edge.example.com"))
	s.poll()
	if got := handshake(t, s, ca, "edge.example.com"); got.Cmp(second.Serial) != 0 {
		t.Fatalf("after bad swaps served %v, want the last good %v", got, second.Serial)
	}
	if n := counter(t, s.m.errors.WithLabelValues("tls")); n != 2 {
		t.Errorf("edge_tls_reload_errors_total = %v, want 2 (one per bad content)", n)
	}
	if c := strings.Count(logs.String(), "keeping the last good certificate"); c != 2 {
		t.Errorf("logged %d errors, want 2:\n%s", c, logs.String())
	}

	// A deleted file too; then a good pair again is taken.
	os.Remove(filepath.Join(sec.Dir, "..data"))
	s.poll()
	if got := handshake(t, s, ca, "edge.example.com"); got.Cmp(second.Serial) != 0 {
		t.Fatalf("with the files gone served %v, want the last good %v", got, second.Serial)
	}
	third := ca.Valid(t, "edge.example.com")
	sec.Swap(t, third)
	s.poll()
	if got := handshake(t, s, ca, "edge.example.com"); got.Cmp(third.Serial) != 0 {
		t.Fatalf("after recovery served %v, want %v", got, third.Serial)
	}
	if n := counter(t, s.m.errors.WithLabelValues("tls")); n != 3 {
		t.Errorf("edge_tls_reload_errors_total = %v, want 3", n)
	}
}

func TestExpiryMetricPerName(t *testing.T) {
	ca := testpki.NewCA(t)
	dir := t.TempDir()
	notAfter := time.Now().Add(10 * time.Hour).Truncate(time.Second)
	p := ca.Issue(t, time.Now().Add(-time.Hour), notAfter, "edge.example.com", "media.example.com")
	cfg := Config{}
	cfg.CertFile, cfg.KeyFile = p.Write(t, dir, "p")
	reg := prometheus.NewRegistry()
	s, err := New(cfg, "tls", time.Hour, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	now := notAfter.Add(-3600 * time.Second)
	s.now = func() time.Time { return now }
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "edge_tls_certificate_expiry_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					got[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	want := map[string]float64{"edge.example.com": 3600, "media.example.com": 3600}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("expiry by name %v, want %v", got, want)
	}
}

func TestValidateShape(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"off":             {Config{}, ""},
		"both":            {Config{CertFile: "a", KeyFile: "b"}, ""},
		"cert only":       {Config{CertFile: "a"}, "tls.key_file"},
		"key only":        {Config{KeyFile: "b"}, "tls.cert_file"},
		"extra no main":   {Config{Certificates: []Pair{{"a", "b"}}}, "tls.certificates: needs tls.cert_file"},
		"extra half":      {Config{CertFile: "a", KeyFile: "b", Certificates: []Pair{{"c", ""}}}, "tls.certificates[0].key_file"},
		"extra both none": {Config{CertFile: "a", KeyFile: "b", Certificates: []Pair{{}}}, "tls.certificates[0]: cert_file and key_file are empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate("tls")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestServerConfigIsModern(t *testing.T) {
	ca := testpki.NewCA(t)
	cfg := Config{}
	cfg.CertFile, cfg.KeyFile = ca.Valid(t, "edge.example.com").Write(t, t.TempDir(), "p")
	s, err := New(cfg, "tls", time.Hour, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	try := func(c *tls.Config) (tls.ConnectionState, error) {
		cc, sc := netPipe()
		srv := tls.Server(sc, s.ServerConfig("acme-tls/1"))
		go func() { srv.Handshake(); srv.Close() }()
		cl := tls.Client(cc, c)
		defer cl.Close()
		cl.SetDeadline(time.Now().Add(10 * time.Second))
		err := cl.Handshake()
		return cl.ConnectionState(), err
	}
	st, err := try(ca.ClientConfig("edge.example.com"))
	if err != nil || st.Version != tls.VersionTLS13 {
		t.Errorf("a modern client: version %x, err %v; want TLS 1.3", st.Version, err)
	}
	old := ca.ClientConfig("edge.example.com")
	old.MaxVersion = tls.VersionTLS11
	old.MinVersion = tls.VersionTLS10
	if _, err := try(old); err == nil {
		t.Error("a TLS 1.1 client was accepted")
	}
	cbc := ca.ClientConfig("edge.example.com")
	cbc.MaxVersion = tls.VersionTLS12
	cbc.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}
	if _, err := try(cbc); err == nil {
		t.Error("a TLS 1.2 client offering only a CBC suite was accepted")
	}
	alpn := ca.ClientConfig("edge.example.com")
	alpn.NextProtos = []string{"h2", "http/1.1"}
	if st, err := try(alpn); err != nil || st.NegotiatedProtocol != "http/1.1" {
		t.Errorf("ALPN: negotiated %q, %v; want http/1.1 (media sockets cannot be hijacked from HTTP/2)", st.NegotiatedProtocol, err)
	}
	acme := ca.ClientConfig("edge.example.com")
	acme.NextProtos = []string{"acme-tls/1"}
	if st, err := try(acme); err != nil || st.NegotiatedProtocol != "acme-tls/1" {
		t.Errorf("extra protocol: negotiated %q, %v", st.NegotiatedProtocol, err)
	}
}

// counter reads one counter's value.
func counter(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The public and the admin listener's stores share one registry.
func TestTwoStoresRegisterSideBySide(t *testing.T) {
	ca := testpki.NewCA(t)
	reg := prometheus.NewRegistry()
	for _, prefix := range []string{"tls", "admin_tls"} {
		cfg := Config{}
		cfg.CertFile, cfg.KeyFile = ca.Valid(t, "edge.example.com").Write(t, t.TempDir(), "p")
		if _, err := New(cfg, prefix, time.Hour, nil, reg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
