package kubee2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
	"github.com/edge-voice/edge/poolmgr"
)

var nsSeq atomic.Int64

// namespace makes a fresh namespace (they never finish terminating without a
// controller-manager) with deploy/base/rbac.yaml's Role bound to edge's user.
func namespace(t *testing.T, admin kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("e2e-%d-%d", time.Now().Unix()%100000, nsSeq.Add(1))
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "base", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	codec := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := codec.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if role, ok := obj.(*rbacv1.Role); ok {
			role.Namespace = ns
			if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "edge"},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: edgeUser}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func newPod(ns, name, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			// A node name makes deletion graceful (deletionTimestamp first),
			// as with a kubelet.
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "agent", Image: "example.com/voice-agent"}},
		},
	}
}

// markReady plays the kubelet: status subresource with phase, IP, condition.
func markReady(t *testing.T, c kubernetes.Interface, ns, name, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The informer with its label selector against a real API server (the fake
// ignores selectors), the status subresource, graceful deletion, and RBAC
// exactly as deploy/ grants it.
func TestInformerPodLifecycle(t *testing.T) {
	c := need(t)
	admin := c.client(t, adminToken)
	ns := namespace(t, admin)
	rdb := testredis.Start(t).Client()
	a, err := allocator.New(rdb, allocator.Config{LeaseTTL: time.Minute, Tiers: allocator.TierConfig{
		Tiers: map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 5}}, DefaultChain: []string{"gold"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := a.Keys()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// edge's own client, with only what deploy/base/rbac.yaml grants.
	edgeClient, err := poolmgr.NewKubeAPI(c.config(edgeToken))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := poolmgr.NewRegistry()
	metrics := poolmgr.NewMetrics(nil)
	src := &poolmgr.KubeSource{Pods: edgeClient.Pods(ns), Namespace: ns, LabelSelector: "app=voice-agent", Port: 8000, Registry: reg, Log: log}
	m := &poolmgr.Manager{
		Pools: a, Registry: reg, Log: log, Metrics: metrics,
		Elector: &poolmgr.LockElector{
			Lock:     &poolmgr.LeaseLock{Leases: edgeClient.Leases(ns), Name: "edge-leader", RetryPeriod: time.Second, Log: log},
			Identity: "edge-0", LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second,
			Log: log, Metrics: metrics,
		},
		SweepInterval:     func() time.Duration { return time.Second },
		ReconcileInterval: func() time.Duration { return time.Second },
	}
	done := make(chan struct{}, 2)
	go func() { src.Run(ctx); done <- struct{}{} }()
	go func() { m.Run(ctx); done <- struct{}{} }()
	defer func() { cancel(); <-done; <-done }()

	pods := admin.CoreV1().Pods(ns)
	for _, p := range []*corev1.Pod{newPod(ns, "agent-0", "voice-agent"), newPod(ns, "other-0", "something-else")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	markReady(t, admin, ns, "other-0", "10.1.0.9", true)
	markReady(t, admin, ns, "agent-0", "10.1.0.7", true)
	testwait.Until(t, 20*time.Second, "agent-0 available", func() bool { return rdb.SIsMember(ctx, k.PoolAvailable("gold"), "agent-0").Val() })
	if addr, _ := reg.Lookup("agent-0"); addr != "10.1.0.7:8000" {
		t.Fatalf("address = %q", addr)
	}
	if _, ok := reg.Get("other-0"); ok || rdb.Exists(ctx, k.PodTier("other-0")).Val() != 0 {
		t.Fatal("a pod outside the label selector was seen")
	}
	if !m.IsLeader() {
		t.Fatal("not leader with the Lease RBAC of deploy/")
	}
	if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA1"}); err != nil {
		t.Fatal(err)
	}
	// Graceful delete: terminating first (out of the pool, call kept) ...
	if err := pods.Delete(ctx, "agent-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 20*time.Second, "terminating pod marked unready", func() bool { return rdb.HGet(ctx, k.PodInfo("agent-0"), "unready").Val() == "1" })
	if _, err := a.Call(ctx, "CA1"); err != nil {
		t.Fatalf("terminating pod's call ended: %v", err)
	}
	// ... then gone: unregistered, call ended.
	zero := int64(0)
	if err := pods.Delete(ctx, "agent-0", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 20*time.Second, "deleted pod unregistered", func() bool { return rdb.Exists(ctx, k.PodTier("agent-0")).Val() == 0 })
	if _, err := a.Call(ctx, "CA1"); err == nil {
		t.Fatal("deleted pod's call still live")
	}
}

func leaseHolder(c kubernetes.Interface, ns string) string {
	l, err := c.CoordinationV1().Leases(ns).Get(context.Background(), "edge-leader", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func isLeader(p *edgetest.Process) bool {
	resp, err := http.Get(p.AdminURL + "/api/v1/status")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st struct {
		IsLeader bool `json:"is_leader"`
	}
	json.NewDecoder(resp.Body).Decode(&st)
	return st.IsLeader
}

// Leader failover between edge processes: kill -9 the leader, the other
// takes over (measured); a SIGTERM hands over through ReleaseOnCancel
// (measured). The new leader keeps Redis true to the API server.
func TestLeaderFailover(t *testing.T) {
	c := need(t)
	admin := c.client(t, adminToken)
	ns := namespace(t, admin)
	redisSrv := testredis.Start(t, testredis.TCP())
	rdb := redisSrv.Client()
	kubeconfig := c.kubeconfig(t, edgeToken)
	cfgPath := filepath.Join(t.TempDir(), "edge.yaml")
	lease, renew, retry := envDur("EDGE_KUBE_E2E_LEASE", 4*time.Second), envDur("EDGE_KUBE_E2E_RENEW", 2*time.Second), envDur("EDGE_KUBE_E2E_RETRY", time.Second)
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`redis: {url: %q}
pods: {source: kubernetes, namespace: %s, label_selector: app=voice-agent, pod_port: 8000, kubeconfig: %q}
leader: {lease_duration: %s, renew_deadline: %s, retry_period: %s}
pool: {reconcile_interval: 1s, zombie_sweep_interval: 1s}
`, redisSrv.URL(), ns, kubeconfig, lease, renew, retry)), 0o600)
	procs := map[string]*edgetest.Process{}
	start := func(id string) {
		procs[id] = edgetest.Start(t, []string{"--config", cfgPath}, "EDGE_LEADER__IDENTITY="+id)
	}
	start("edge-a")
	start("edge-b")
	testwait.Until(t, 30*time.Second, "a leader", func() bool { return leaseHolder(admin, ns) != "" })

	var killTimes []time.Duration
	next := 'c'
	for round := range 3 {
		leader := leaseHolder(admin, ns)
		p := procs[leader]
		if p == nil {
			t.Fatalf("lease held by unknown %q", leader)
		}
		testwait.Until(t, 10*time.Second, leader+" reports leadership", func() bool { return isLeader(p) })
		t0 := time.Now()
		p.Kill() // SIGKILL: no release
		delete(procs, leader)
		testwait.Until(t, 60*time.Second, "takeover after kill -9", func() bool {
			h := leaseHolder(admin, ns)
			return h != "" && h != leader
		})
		d := time.Since(t0)
		killTimes = append(killTimes, d)
		newLeader := leaseHolder(admin, ns)
		t.Logf("round %d: kill -9 %s -> %s leads after %v", round, leader, newLeader, d.Round(10*time.Millisecond))
		testwait.Until(t, 10*time.Second, newLeader+" reports leadership", func() bool { return isLeader(procs[newLeader]) })

		// The new leader keeps Redis true to the API server.
		name := fmt.Sprintf("agent-%d", round)
		if _, err := admin.CoreV1().Pods(ns).Create(context.Background(), newPod(ns, name, "voice-agent"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		markReady(t, admin, ns, name, "10.2.0."+fmt.Sprint(round+1), true)
		testwait.Until(t, 20*time.Second, name+" registered by the new leader", func() bool {
			return rdb.Exists(context.Background(), allocator.NewKeys("").PodTier(name)).Val() == 1
		})
		start(fmt.Sprintf("edge-%c", next))
		next++
	}

	// SIGTERM: loops stop, then the Lease is released for a fast hand-over.
	leader := leaseHolder(admin, ns)
	t0 := time.Now()
	procs[leader].Stop(30 * time.Second)
	testwait.Until(t, 60*time.Second, "takeover after SIGTERM", func() bool {
		h := leaseHolder(admin, ns)
		return h != "" && h != leader
	})
	term := time.Since(t0)
	sort.Slice(killTimes, func(i, j int) bool { return killTimes[i] < killTimes[j] })
	var sum time.Duration
	for _, d := range killTimes {
		sum += d
	}
	t.Logf("FAILOVER lease=%s renew=%s retry=%s: kill -9 mean %v (min %v, max %v, n=%d); SIGTERM %v",
		lease, renew, retry, (sum / time.Duration(len(killTimes))).Round(10*time.Millisecond),
		killTimes[0].Round(10*time.Millisecond), killTimes[len(killTimes)-1].Round(10*time.Millisecond), len(killTimes),
		term.Round(10*time.Millisecond))
	if max := killTimes[len(killTimes)-1]; max > lease+2*retry+5*time.Second {
		t.Errorf("takeover after kill -9 took %v, want about lease_duration (%v) + retry", max, lease)
	}
}

func envDur(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}
