package nodee2e

import (
	"context"
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
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The node's addresses, all inside the test's network namespace: the
// node's own (eth0, a veth whose peer has no address: the namespace's
// default route leads nowhere), the pods' bridge and the Services' range.
const (
	nodeIP      = "10.200.0.2"
	podCIDR     = "10.88.0.0/16"
	serviceCIDR = "10.96.0.0/16"
	apiService  = "10.96.0.1" // the kubernetes Service, first of serviceCIDR
	nodeName    = "node0"
	adminToken  = "node-e2e-admin-token"
	apiURL      = "https://" + nodeIP + ":6443"
	// recorderPort is where the agents report what they saw (the test
	// listens on the node's address).
	recorderPort = "9999"
)

// node is the single-node cluster: its processes in start order.
type node struct {
	t      *testing.T
	work   string
	bin    string // the Kubernetes binaries (build.sh)
	images string // the image archives (images.sh)
	procs  []*proc
	cs     kubernetes.Interface
	cfg    *rest.Config
	// cgroup is the kubelet's cgroupRoot: the pods' cgroups are under it.
	cgroup string
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (n *node) path(elem ...string) string {
	return filepath.Join(append([]string{n.work}, elem...)...)
}

// run runs a command to completion, failing the test on error.
func (n *node) run(name string, args ...string) string {
	n.t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// spawn starts a long-running component, its output in work/logs/name.log.
func (n *node) spawn(name, bin string, args ...string) *proc {
	n.t.Helper()
	os.MkdirAll(n.path("logs"), 0o755)
	logPath := n.path("logs", name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Not in the test's process group: a ^C reaches the test, which stops
	// the components in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start %s: %v", name, err)
	}
	logf.Close()
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	n.procs = append(n.procs, p)
	return p
}

// stop sends SIGTERM to the process by its PID and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the end of a component's log, for a failure message.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitHTTP polls url until it answers 200 (a component starting offers
// nothing to wait on but its port), failing with the log of p.
func (n *node) waitHTTP(p *proc, url string, timeout time.Duration) {
	n.t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p.exited() || time.Now().After(deadline) {
			n.t.Fatalf("%s: %s not ready after %v (exited: %v):\n%s", p.name, url, timeout, p.exited(), p.tail(6000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// netns sets up the namespace's network: loopback, the node's address and
// a default route (Service addresses are routed before kube-proxy's DNAT
// picks a pod) that ends at a veth peer with no address.
func (n *node) netns() {
	n.run("ip", "link", "set", "lo", "up")
	n.run("ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p")
	n.run("ip", "addr", "add", nodeIP+"/24", "dev", "eth0")
	n.run("ip", "link", "set", "eth0", "up")
	n.run("ip", "link", "set", "eth0p", "up")
	n.run("ip", "route", "add", "default", "dev", "eth0")
	for _, s := range []string{"net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1"} {
		if out, err := exec.Command("sysctl", "-w", s).CombinedOutput(); err != nil {
			n.t.Logf("sysctl %s: %v %s", s, err, out)
		}
	}
}

// pki writes the cluster's CA, the apiserver's serving certificate (the
// node's address, the kubernetes Service's, loopback and its names), the
// service account key and the static token file: every component and the
// test authenticate with one token in system:masters.
func (n *node) pki() {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edge-node-e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		n.t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP(nodeIP), net.ParseIP(apiService), net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		n.t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	sa, _ := rsa.GenerateKey(rand.Reader, 2048)
	os.MkdirAll(n.path("pki"), 0o700)
	for name, block := range map[string]*pem.Block{
		"ca.crt":      {Type: "CERTIFICATE", Bytes: caDER},
		"serving.crt": {Type: "CERTIFICATE", Bytes: der},
		"serving.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
		"sa.key":      {Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)},
	} {
		if err := os.WriteFile(n.path("pki", name), pem.EncodeToMemory(block), 0o600); err != nil {
			n.t.Fatal(err)
		}
	}
	n.write("pki/tokens.csv", adminToken+",admin,admin,system:masters\n")
	n.write("kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: node, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: node, context: {cluster: node, user: admin}}]
current-context: node
`, apiURL, n.path("pki", "ca.crt"), adminToken))
	n.cfg = &rest.Config{Host: apiURL, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{CAFile: n.path("pki", "ca.crt")}}
	cs, err := kubernetes.NewForConfig(n.cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	n.cs = cs
}

func (n *node) write(rel, data string) string {
	n.t.Helper()
	p := n.path(rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		n.t.Fatal(err)
	}
	return p
}

func (n *node) kbin(name string) string { return filepath.Join(n.bin, name) }

// controlPlane starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler.
func (n *node) controlPlane() {
	// etcd's data in memory: this machine's disk is shared.
	etcdDir, err := os.MkdirTemp("/dev/shm", "edge-node-e2e-etcd-")
	if err != nil {
		etcdDir = n.path("etcd")
	}
	n.t.Cleanup(func() { os.RemoveAll(etcdDir) })
	etcd := n.spawn("etcd", "etcd", "--name", "node", "--data-dir", etcdDir,
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "node=http://127.0.0.1:2380")
	n.waitHTTP(etcd, "http://127.0.0.1:2379/health", 60*time.Second)
	pki := func(f string) string { return n.path("pki", f) }
	api := n.spawn("kube-apiserver", n.kbin("kube-apiserver"),
		"--bind-address=0.0.0.0", "--advertise-address="+nodeIP, "--secure-port=6443",
		"--etcd-servers=http://127.0.0.1:2379",
		"--tls-cert-file="+pki("serving.crt"), "--tls-private-key-file="+pki("serving.key"),
		"--client-ca-file="+pki("ca.crt"), "--token-auth-file="+pki("tokens.csv"),
		"--authorization-mode=Node,RBAC", "--service-cluster-ip-range="+serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki("sa.key"), "--service-account-signing-key-file="+pki("sa.key"),
		"--allow-privileged=false",
		// The node's name resolves nowhere in the namespace: logs and exec
		// reach the kubelet at its address.
		"--kubelet-preferred-address-types=InternalIP",
		// etcd 3.4 (Debian's) cannot serve watch-list requests.
		"--feature-gates=WatchList=false")
	n.waitHTTP(api, apiURL+"/readyz", 120*time.Second)
	kc := n.path("kubeconfig")
	n.spawn("kube-controller-manager", n.kbin("kube-controller-manager"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port=10257", "--leader-elect=false",
		"--service-account-private-key-file="+pki("sa.key"), "--root-ca-file="+pki("ca.crt"),
		"--cluster-name=edge-node-e2e")
	n.spawn("kube-scheduler", n.kbin("kube-scheduler"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port=10259", "--leader-elect=false")
}

// containerd starts containerd with its own config, root, state and
// socket, and imports the images into its k8s.io namespace.
func (n *node) containerd() {
	n.write("cni/net.d/10-edge-node.conflist", fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "edge-node",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR, n.path("cni", "ipam")))
	cfg := n.write("containerd/config.toml", fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/edge-node-e2e/pause:dev"
  # The sandbox may not lower its OOM score here: without this runc fails
  # with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "runc"
`, n.path("containerd", "root"), n.path("containerd", "state"), n.sock(), n.path("containerd", "ttrpc.sock"),
		n.path("containerd", "opt"), n.path("cni", "net.d")))
	p := n.spawn("containerd", "containerd", "--config", cfg)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := exec.Command("ctr", "--address", n.sock(), "version").CombinedOutput(); err == nil {
			break
		}
		if p.exited() || time.Now().After(deadline) {
			n.t.Fatalf("containerd did not start:\n%s", p.tail(6000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, img := range []string{"pause", "agent", "edge"} {
		n.run("ctr", "--address", n.sock(), "-n", "k8s.io", "images", "import", filepath.Join(n.images, img+".tar"))
	}
	n.t.Logf("images on the node:\n%s", n.run("ctr", "--address", n.sock(), "-n", "k8s.io", "images", "ls", "-q"))
}

func (n *node) sock() string { return n.path("containerd", "containerd.sock") }

// kubelet starts the kubelet on containerd with what this machine needs
// (cgroup v1 with cgroupfs, no QoS cgroups, no swap check) and the
// seccomp profiles of deploy/components in its seccomp directory.
func (n *node) kubelet() {
	root := n.path("kubelet")
	os.MkdirAll(filepath.Join(root, "seccomp"), 0o755)
	prof, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "components", "uring", "edge-uring.json"))
	if err != nil {
		n.t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "seccomp", "edge-uring.json"), prof, 0o644)
	resolv := n.write("resolv.conf", "# the node's own: nothing outside the namespace to ask\n")
	cfg := n.write("kubelet.yaml", fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %q
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://%s
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: %q
podLogsDirectory: %q
serializeImagePulls: false
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", nodefs.inodesFree: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.cgroup, n.sock(), nodeIP, nodeIP, resolv, n.path("pod-logs")))
	p := n.spawn("kubelet", n.kbin("kubelet"), "--config="+cfg, "--kubeconfig="+n.path("kubeconfig"),
		"--root-dir="+root, "--cert-dir="+n.path("kubelet-pki"), "--hostname-override="+nodeName, "--node-ip="+nodeIP)
	n.waitHTTP(p, "http://127.0.0.1:10248/healthz", 120*time.Second)
	n.waitFor("node "+nodeName+" Ready", 120*time.Second, func() bool {
		nd, err := n.cs.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return true
			}
		}
		return false
	}, p)
}

// kubeProxy starts kube-proxy in iptables mode. It leaves the conntrack
// sysctls alone (some are not the namespace's to set).
func (n *node) kubeProxy() {
	cfg := n.write("kube-proxy.yaml", fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
clusterCIDR: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, n.path("kubeconfig"), nodeName, podCIDR))
	p := n.spawn("kube-proxy", n.kbin("kube-proxy"), "--config="+cfg)
	n.waitHTTP(p, "http://127.0.0.1:10256/healthz", 60*time.Second)
}

// coreDNS starts CoreDNS on the node's address, the kubelet's clusterDNS.
func (n *node) coreDNS() {
	corefile := n.write("Corefile", fmt.Sprintf(`.:53 {
    errors
    health 127.0.0.1:8091
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s node
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
`, n.path("kubeconfig")))
	p := n.spawn("coredns", n.kbin("coredns"), "-conf", corefile)
	n.waitHTTP(p, "http://127.0.0.1:8181/ready", 60*time.Second)
}

// redis runs the Redis edge's config names (redis://redis:6379): on the
// node, behind a Service without selector (overlay/redis.yaml), as a
// managed Redis outside the cluster would be.
func (n *node) redis() {
	n.spawn("redis-server", "redis-server", "--port", "6379", "--bind", nodeIP, "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	n.waitFor("redis", 30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, nil)
}

// waitFor polls cond until timeout (the cluster's state offers no event
// the test could wait on without a watch per kind), failing with p's log.
func (n *node) waitFor(what string, timeout time.Duration, cond func() bool, p *proc) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			msg := ""
			if p != nil {
				msg = p.tail(6000)
			}
			n.t.Fatalf("timed out after %v waiting for %s\n%s", timeout, what, msg)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// kubectl runs the built kubectl against the node.
func (n *node) kubectl(args ...string) (string, error) {
	out, err := exec.Command(n.kbin("kubectl"), append([]string{"--kubeconfig=" + n.path("kubeconfig")}, args...)...).CombinedOutput()
	return string(out), err
}

func (n *node) mustKubectl(args ...string) string {
	n.t.Helper()
	out, err := n.kubectl(args...)
	if err != nil {
		n.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// stop ends the node: the workloads first (forced, so that their preStop
// hooks and grace periods do not hold the test), then each component by
// its PID in reverse start order.
func (n *node) stop() {
	if n.cs != nil {
		n.kubectl("delete", "namespace", "voice", "--wait=false")
		n.kubectl("-n", "voice", "delete", "pods", "--all", "--grace-period=0", "--force", "--wait=false")
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			out, err := exec.Command("ctr", "--address", n.sock(), "-n", "k8s.io", "tasks", "ls", "-q").Output()
			if err != nil || strings.TrimSpace(string(out)) == "" {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].stop(10 * time.Second)
	}
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}
