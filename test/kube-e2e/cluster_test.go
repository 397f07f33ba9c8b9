package kubee2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edge-voice/edge/internal/seccomptest"
)

// cluster is one etcd + kube-apiserver for the whole test binary.
type cluster struct {
	dir    string
	url    string
	caFile string
	procs  []*exec.Cmd
}

// Tokens of the static token file: the test's admin, and the identity edge
// runs as (bound to deploy/base/rbac.yaml's Role in each test namespace).
const (
	adminToken = "e2e-admin-token"
	edgeToken  = "e2e-edge-token"
	edgeUser   = "edge-e2e"
)

var shared *cluster

func TestMain(m *testing.M) {
	// This test binary doubles as the launcher that starts edge under a
	// seccomp profile (seccomp_test.go); it never returns then.
	seccomptest.Launch()
	bin := os.Getenv("EDGE_KUBE_APISERVER")
	if bin == "" {
		fmt.Println("kube-e2e: skipped: EDGE_KUBE_APISERVER is not set (build the binary with test/kube-e2e/build-apiserver.sh, or run `make kube-e2e`)")
		os.Exit(m.Run()) // every test skips
	}
	c, err := startCluster(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-e2e: start cluster:", err)
		if c != nil {
			c.stop()
		}
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	c.stop()
	os.Exit(code)
}

// need skips the test when there is no cluster.
func need(t *testing.T) *cluster {
	t.Helper()
	if shared == nil {
		t.Skip("kube-e2e: EDGE_KUBE_APISERVER is not set; build kube-apiserver with test/kube-e2e/build-apiserver.sh")
	}
	return shared
}

func startCluster(bin string) (*cluster, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("EDGE_KUBE_APISERVER: %w", err)
	}
	etcd := os.Getenv("EDGE_KUBE_ETCD")
	if etcd == "" {
		etcd = "/usr/bin/etcd"
	}
	// etcd 3.4 has no --unsafe-no-fsync: its data lives in memory instead.
	base := "/dev/shm"
	if _, err := os.Stat(base); err != nil {
		base = ""
	}
	dir, err := os.MkdirTemp(base, "edge-kube-e2e-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	if err := c.writeCerts(); err != nil {
		return c, err
	}
	os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(
		adminToken+",admin,admin,system:masters\n"+edgeToken+","+edgeUser+","+edgeUser+"\n"), 0o600)

	ports := freePorts(3)
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := c.spawn("etcd", etcd, "--name", "e2e", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "e2e="+peer); err != nil {
		return c, err
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	c.url = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	if err := c.spawn("kube-apiserver", bin,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(ports[2]), "--etcd-servers="+client,
		"--tls-cert-file="+f("serving.crt"), "--tls-private-key-file="+f("serving.key"),
		"--client-ca-file="+f("ca.crt"), "--token-auth-file="+f("tokens.csv"),
		"--authorization-mode=RBAC", "--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+f("sa.key"), "--service-account-signing-key-file="+f("sa.key"),
		"--disable-admission-plugins=ServiceAccount", "--endpoint-reconciler-type=none",
		// etcd 3.4.23 cannot serve watch-list requests (needs 3.4.31+).
		"--feature-gates=WatchList=false"); err != nil {
		return c, err
	}
	return c, c.waitReady(90 * time.Second)
}

func (c *cluster) spawn(name, bin string, args ...string) error {
	logf, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Process.Kill()
		c.procs[i].Wait()
	}
	os.RemoveAll(c.dir)
}

func (c *cluster) waitReady(timeout time.Duration) error {
	cfg := c.config(adminToken)
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(c.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond) // a process starting: nothing to await but its port
	}
	log, _ := os.ReadFile(filepath.Join(c.dir, "kube-apiserver.log"))
	if len(log) > 4000 {
		log = log[len(log)-4000:]
	}
	return fmt.Errorf("kube-apiserver not ready after %v:\n%s", timeout, log)
}

func (c *cluster) config(token string) *rest.Config {
	return &rest.Config{Host: c.url, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: c.caFile}}
}

func (c *cluster) client(t *testing.T, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.config(token))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// kubeconfig writes a kubeconfig for token, for edge processes.
func (c *cluster) kubeconfig(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: edge, user: {token: %q}}]
contexts: [{name: e2e, context: {cluster: e2e, user: edge}}]
current-context: e2e
`, c.url, c.caFile, token)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeCerts makes a CA, a serving certificate for 127.0.0.1 and a service
// account key, in Go (no openssl needed).
func (c *cluster) writeCerts() error {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edge-e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	sa, _ := rsa.GenerateKey(rand.Reader, 2048)
	c.caFile = filepath.Join(c.dir, "ca.crt")
	for name, block := range map[string]*pem.Block{
		"ca.crt":      {Type: "CERTIFICATE", Bytes: caDER},
		"serving.crt": {Type: "CERTIFICATE", Bytes: der},
		"serving.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
		"sa.key":      {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)},
	} {
		if err := os.WriteFile(filepath.Join(c.dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func freePorts(n int) []int {
	var out []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}
