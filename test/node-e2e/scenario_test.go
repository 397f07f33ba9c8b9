package nodee2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cluster is the running node with edge and the agents deployed.
type cluster struct {
	*node
	rec      *recorder
	logs     *podLogs
	provider *provider
	admin    admin
}

// runNode runs inside the network namespace: it brings the node up,
// deploys, places calls and runs the rollouts as subtests.
func runNode(t *testing.T, work string) {
	n := &node{t: t, work: work, bin: os.Getenv("EDGE_NODE_E2E_BIN"), images: os.Getenv("EDGE_NODE_E2E_IMAGES"),
		cgroup: "/" + filepath.Base(work)}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range n.procs {
				t.Logf("--- %s (pid %d) log tail:\n%s", p.name, p.cmd.Process.Pid, p.tail(3000))
			}
		}
		n.stop()
	})
	start := time.Now()
	step := func(what string, f func()) {
		t0 := time.Now()
		f()
		t.Logf("bring-up: %s in %v (%v since start)", what, time.Since(t0).Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
	}
	step("network namespace", n.netns)
	step("certificates", n.pki)
	step("etcd, kube-apiserver, controller-manager, scheduler", n.controlPlane)
	step("containerd and the images", n.containerd)
	step("kubelet, node Ready", n.kubelet)
	step("kube-proxy", n.kubeProxy)
	step("CoreDNS", n.coreDNS)
	step("Redis", n.redis)
	c := &cluster{node: n, rec: startRecorder(t)}
	c.logs = n.followLogs()
	step("deploy/ through the test overlay, edge leading and ready, agents registered", c.deploy)
	t.Logf("bring-up: total %v", time.Since(start).Round(100*time.Millisecond))

	t.Run("calls", c.calls)
	t.Run("edge-rolling-update", c.edgeRollingUpdate)
	t.Run("agent-rolling-update", c.agentRollingUpdate)
	t.Run("agent-deleted-mid-call", c.agentDeleted)
	t.Run("agent-deleted-mid-call-kept", c.agentDeletedKept)
	t.Run("leader-deleted", c.leaderDeleted)
	t.Run("uring-overlay", c.uringOverlay)
	t.Run("edge-logs", c.edgeLogsClean)
}

// edgeLogsClean: what every edge pod logged, from its start to its exit
// (rollouts, deletions), holds no error and no panic, and no replica was
// found dead: every edge pod here stopped gracefully. Warnings are shown.
func (c *cluster) edgeLogsClean(t *testing.T) {
	c.logs.stop()
	for _, l := range c.logs.lines("edge-", `"level":"WARN"`, "level=WARN") {
		t.Log(l)
	}
	for _, l := range c.logs.lines("edge-", `"level":"ERROR"`, "level=ERROR", "panic:", "fatal error:", "replicas found dead") {
		t.Error(l)
	}
}

func secret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

const ns = "voice"

// deploy creates the namespace and the Secrets deploy/base documents,
// applies the overlay and waits until edge leads, has the agents in its
// pools and is ready.
func (c *cluster) deploy() {
	t := c.t
	adminToken, twilioToken := secret(), secret()
	c.mustKubectl("create", "namespace", ns)
	c.mustKubectl("-n", ns, "create", "secret", "generic", "edge-admin", "--from-literal=token="+adminToken)
	c.mustKubectl("-n", ns, "create", "secret", "generic", "edge-secrets",
		"--from-literal=media-token-secret="+secret(), "--from-literal=twilio-auth-tokens="+twilioToken)
	t.Log(c.mustKubectl("apply", "-k", filepath.Join(repoRoot(), "test", "node-e2e", "overlay")))
	c.waitRollout("deployment/edge", 5*time.Minute)
	c.waitRollout("statefulset/voice-agent", 5*time.Minute)
	c.admin = admin{base: "http://" + c.clusterIP("edge-admin") + ":9090", token: adminToken}
	c.provider = newProvider("http://"+c.clusterIP("edge"), twilioToken)
	c.waitFor("edge leads (Lease edge-leader held)", 2*time.Minute, func() bool { return c.leader() != "" }, nil)
	c.waitFor("edge has the 4 agents in its pools", 2*time.Minute, func() bool { return c.admin.pooled() == 4 }, nil)
	c.waitFor("edge ready through its Service", time.Minute, func() bool {
		resp, err := http.Get(c.provider.public + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, nil)
}

// waitRollout waits for kubectl rollout status, failing with the pods'
// state.
func (c *cluster) waitRollout(what string, timeout time.Duration) {
	c.t.Helper()
	if out, err := c.kubectl("-n", ns, "rollout", "status", what, "--timeout="+timeout.String()); err != nil {
		pods, _ := c.kubectl("-n", ns, "get", "pods", "-o", "wide")
		events, _ := c.kubectl("-n", ns, "get", "events", "--sort-by=.lastTimestamp")
		c.t.Fatalf("rollout of %s: %v\n%s\n%s\n%s", what, err, out, pods, events)
	}
}

func (c *cluster) clusterIP(svc string) string {
	c.t.Helper()
	s, err := c.cs.CoreV1().Services(ns).Get(context.Background(), svc, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return s.Spec.ClusterIP
}

// leader is the holder of edge's Lease ("" when none).
func (c *cluster) leader() string {
	l, err := c.cs.CoordinationV1().Leases(ns).Get(context.Background(), "edge-leader", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (c *cluster) pods(selector string) []corev1.Pod {
	c.t.Helper()
	l, err := c.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		c.t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// checkCalls fails on every call that was refused, cut or echoed wrong.
func checkCalls(t *testing.T, calls []call) {
	t.Helper()
	t.Log(summary(calls))
	if len(calls) == 0 {
		t.Error("no call was placed")
	}
	bad := 0
	for _, c := range calls {
		if c.Err != "" {
			bad++
			if bad <= 20 {
				t.Errorf("call %s (pod %s, webhook %s, media %s-%s): %s (close code %d)", c.Sid, c.Pod,
					c.Webhook.Format("15:04:05.000"), c.Start.Format("15:04:05.000"), c.End.Format("15:04:05.000"), c.Err, c.CloseCode)
			}
		}
	}
}

// calls: calls through the Service reach the agents and back.
func (c *cluster) calls(t *testing.T) {
	l := c.provider.load(2, 2*time.Second)
	time.Sleep(6 * time.Second)
	checkCalls(t, l.finish())
}

// edgeRollingUpdate: edge moved to a new image tag with calls on the
// line; no webhook refused, no call cut.
func (c *cluster) edgeRollingUpdate(t *testing.T) {
	before := c.pods("app=edge")
	l := c.provider.load(2, 5*time.Second)
	time.Sleep(3 * time.Second)
	t0 := time.Now()
	c.mustKubectl("-n", ns, "set", "image", "deployment/edge", "edge=localhost/edge:dev-next")
	c.waitRollout("deployment/edge", 10*time.Minute)
	// The old pods drain their sockets after the rollout reports done.
	c.waitFor("the old edge pods gone", 5*time.Minute, func() bool {
		for _, p := range c.pods("app=edge") {
			for _, b := range before {
				if p.Name == b.Name {
					return false
				}
			}
		}
		return true
	}, nil)
	t.Logf("edge rolled to localhost/edge:dev-next in %v (old pods gone)", time.Since(t0).Round(100*time.Millisecond))
	time.Sleep(3 * time.Second)
	checkCalls(t, l.finish())
}

// agentRollingUpdate: the voice-agent StatefulSet rolled with calls on
// the line: every old pod's preStop drained it before it got SIGTERM, no
// call was sent to it after edge took its drain, and its calls ended as
// the caller ended them.
func (c *cluster) agentRollingUpdate(t *testing.T) {
	t0 := time.Now()
	before := map[instance]bool{}
	for _, p := range c.pods("app=voice-agent") {
		before[instance{p.Name, p.Status.PodIP}] = true
	}
	l := c.provider.load(3, 6*time.Second)
	time.Sleep(4 * time.Second)
	c.mustKubectl("-n", ns, "patch", "statefulset", "voice-agent", "-p",
		`{"spec":{"template":{"metadata":{"annotations":{"edge-node-e2e/revision":"`+fmt.Sprint(time.Now().Unix())+`"}}}}}`)
	c.waitRollout("statefulset/voice-agent", 10*time.Minute)
	t.Logf("voice-agent rolled in %v", time.Since(t0).Round(100*time.Millisecond))
	c.waitFor("edge has the 4 new agents in its pools", time.Minute, func() bool { return c.admin.pooled() == 4 }, nil)
	time.Sleep(2 * time.Second)
	calls := l.finish()
	checkCalls(t, calls)
	// Each old pod's exit is its last event; judgeDrains names one missing.
	exited := func() bool {
		gone := map[instance]bool{}
		for _, e := range c.rec.since(t0) {
			if e.Kind == "exit" {
				gone[e.instance()] = true
			}
		}
		for in := range before {
			if !gone[in] {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !exited() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	judgeDrains(t, c.rec.since(t0), calls, before)
}

// judgeDrains checks each replaced instance's events: prestop, draining,
// drained, then SIGTERM and a clean exit; no call on it whose webhook edge
// answered after it took the drain; its calls closed by the caller (1000).
func judgeDrains(t *testing.T, events []event, calls []call, old map[instance]bool) {
	t.Helper()
	byCall := map[string]call{}
	for _, cl := range calls {
		byCall[cl.Sid] = cl
	}
	type seen struct {
		prestop, draining, drained, term, exit time.Time
		calls                                  []event
		closes                                 []event
	}
	inst := map[instance]*seen{}
	for _, e := range events {
		s := inst[e.instance()]
		if s == nil {
			s = &seen{}
			inst[e.instance()] = s
		}
		switch e.Kind {
		case "prestop":
			s.prestop = e.At
		case "draining":
			s.draining = e.At
		case "drained":
			s.drained = e.At
		case "term":
			s.term = e.At
		case "exit":
			s.exit = e.At
		case "call":
			s.calls = append(s.calls, e)
		case "close":
			s.closes = append(s.closes, e)
		}
	}
	for in := range old {
		s := inst[in]
		if s == nil {
			t.Errorf("%s (%s): no event at all in the rollout", in.Pod, in.IP)
			continue
		}
		t.Logf("%s (%s): preStop %s, drain taken %s, drained %s, SIGTERM %s, exit %s; %d calls, closes %v", in.Pod, in.IP,
			clock(s.prestop), clock(s.draining), clock(s.drained), clock(s.term), clock(s.exit), len(s.calls), codes(s.closes))
		switch {
		case s.prestop.IsZero() || s.drained.IsZero():
			t.Errorf("%s (%s): not drained by its preStop", in.Pod, in.IP)
		case s.draining.IsZero():
			t.Errorf("%s (%s): edge never took the preStop's drain", in.Pod, in.IP)
		case s.term.IsZero() || s.term.Before(s.drained):
			t.Errorf("%s (%s): SIGTERM at %s before the preStop had drained it (%s)", in.Pod, in.IP, clock(s.term), clock(s.drained))
		case s.exit.IsZero():
			t.Errorf("%s (%s): killed, not exited, after SIGTERM", in.Pod, in.IP)
		}
		for _, e := range s.calls {
			cl, ok := byCall[e.Call]
			if ok && !s.draining.IsZero() && cl.Webhook.After(s.draining) {
				t.Errorf("call %s sent to %s (%s) at %s, after edge took its drain at %s", e.Call, in.Pod, in.IP, clock(cl.Webhook), clock(s.draining))
			}
		}
		for _, e := range s.closes {
			if e.Code != 1000 {
				t.Errorf("a call on %s (%s) ended with close %d, not the caller's 1000: %s", in.Pod, in.IP, e.Code, e.Note)
			}
		}
	}
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000")
}

func codes(es []event) []int {
	var out []int
	for _, e := range es {
		out = append(out, e.Code)
	}
	return out
}

// agentDeleted: an agent pod deleted (forced: its container is killed
// after the minimum grace) while it holds a call. The call ends with a
// close frame from edge, and the pod leaves edge's pools within seconds:
// edge's record of the name stops naming the call (404, or the
// StatefulSet's replacement registered afresh).
func (c *cluster) agentDeleted(t *testing.T) {
	t0 := time.Now()
	done := make(chan call, 1)
	go func() { done <- c.provider.place(context.Background(), 60*time.Second) }()
	var on event
	c.waitFor("the call on an agent", 20*time.Second, func() bool {
		for _, e := range c.rec.since(t0) {
			if e.Kind == "call" {
				on = e
				return true
			}
		}
		return false
	}, nil)
	time.Sleep(time.Second)
	deleted := time.Now()
	stopWatch := c.watchPods(on.Pod, deleted)
	defer stopWatch()
	left := make(chan time.Duration, 1)
	stopInfo := c.watchPodInfo(on.Pod, deleted, func(info podRecord, err error) bool {
		if err != nil || info.Call != on.Call {
			left <- time.Since(deleted)
			return true
		}
		return false
	})
	defer stopInfo()
	c.mustKubectl("-n", ns, "delete", "pod", on.Pod, "--grace-period=0", "--force", "--wait=false")
	var cl call
	select {
	case cl = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the call on %s still up 30 s after its pod was deleted", on.Pod)
	}
	t.Logf("call on %s (%s) ended %v after the delete: %s (close code %d)", on.Pod, on.IP, cl.End.Sub(deleted).Round(time.Millisecond), cl.Err, cl.CloseCode)
	if !cl.Cut || cl.CloseCode == -1 {
		t.Errorf("the call did not end with a close frame from edge: cut %v, close code %d, %s", cl.Cut, cl.CloseCode, cl.Err)
	}
	select {
	case d := <-left:
		t.Logf("%s (%s) out of edge's pools %v after the delete", on.Pod, on.IP, d.Round(time.Millisecond))
		if d > 10*time.Second {
			t.Errorf("%s left edge's pools only %v after it was deleted", on.Pod, d)
		}
	case <-time.After(30*time.Second - time.Since(deleted)):
		t.Errorf("%s still in edge's pools with call %s 30 s after it was deleted", on.Pod, on.Call)
	}
	for _, e := range c.rec.since(t0) {
		if e.instance() == on.instance() {
			t.Logf("%s (%s): %s %s %s %d %s", e.Pod, e.IP, clock(e.At), e.Kind, e.Call, e.Code, e.Note)
		}
	}
	c.waitReplaced(on.Pod)
}

// leaderDeleted: the leading edge pod deleted with calls on the line:
// another replica leads within the Lease's bound, and no call is refused
// or cut.
func (c *cluster) leaderDeleted(t *testing.T) {
	l := c.provider.load(2, 5*time.Second)
	time.Sleep(3 * time.Second)
	old := c.leader()
	if old == "" {
		t.Fatal("no edge leads")
	}
	deleted := time.Now()
	c.mustKubectl("-n", ns, "delete", "pod", old, "--wait=false")
	// The old leader leads on while it serves out http.shutdown_delay,
	// then releases the Lease; the gap is from its release to the next
	// holder.
	var took, released time.Duration
	c.waitFor("another edge pod leads", time.Minute, func() bool {
		h := c.leader()
		if h != old && released == 0 {
			released = time.Since(deleted)
		}
		if h != "" && h != old {
			took = time.Since(deleted)
			return true
		}
		return false
	}, nil)
	// leader.lease_duration in deploy/base/configmap.yaml.
	const bound = 15 * time.Second
	t.Logf("%s deleted; it released the Lease %v later, %s leads %v later (bound %v)", old,
		released.Round(time.Millisecond), c.leader(), took.Round(time.Millisecond), bound)
	if took > bound {
		t.Errorf("a new leader took %v, more than the Lease's %v", took, bound)
	}
	c.waitRollout("deployment/edge", 5*time.Minute)
	time.Sleep(3 * time.Second)
	checkCalls(t, l.finish())
}

// uringOverlay: edge moved to deploy/components/uring on the same node:
// its media sockets run on io_uring under the Localhost profile, or
// edge_proxy_relay_info says why not.
func (c *cluster) uringOverlay(t *testing.T) {
	t.Log(c.mustKubectl("apply", "-k", filepath.Join(repoRoot(), "test", "node-e2e", "overlay-uring")))
	c.waitRollout("deployment/edge", 10*time.Minute)
	var dep appsv1.Deployment
	if d, err := c.cs.AppsV1().Deployments(ns).Get(context.Background(), "edge", metav1.GetOptions{}); err == nil {
		dep = *d
	}
	if sp := dep.Spec.Template.Spec.SecurityContext.SeccompProfile; sp == nil || sp.Type != corev1.SeccompProfileTypeLocalhost {
		t.Fatalf("the Deployment is not on the Localhost profile: %+v", sp)
	}
	c.waitFor("the old edge pods gone", 5*time.Minute, func() bool {
		for _, p := range c.pods("app=edge") {
			if p.Spec.SecurityContext.SeccompProfile == nil || p.Spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost {
				return false
			}
		}
		return true
	}, nil)
	l := c.provider.load(2, 3*time.Second)
	time.Sleep(8 * time.Second)
	checkCalls(t, l.finish())
	for _, p := range c.pods("app=edge") {
		base := "http://" + p.Status.PodIP + ":9090"
		info := c.admin.metricLines(base, "edge_proxy_relay_info")
		relayed := c.admin.metricLines(base, "edge_proxy_relayed_sockets_total")
		t.Logf("%s: %v %v", p.Name, info, relayed)
		if len(info) != 1 || !strings.Contains(info[0], `running="uring"`) {
			t.Errorf("%s does not relay on io_uring under edge-uring.json: %v", p.Name, info)
		}
	}
}

// watchPods logs every event of the pod named name, with its time since t0.
func (c *cluster) watchPods(name string, t0 time.Time) func() {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		c.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			ready := false
			for _, cd := range p.Status.Conditions {
				if cd.Type == corev1.PodReady {
					ready = cd.Status == corev1.ConditionTrue
				}
			}
			c.t.Logf("+%v pod %s %s uid %s phase %s ip %s ready %v deleting %v", time.Since(t0).Round(time.Millisecond),
				ev.Type, p.Name, p.UID[:8], p.Status.Phase, p.Status.PodIP, ready, p.DeletionTimestamp != nil)
		}
	}()
	return func() { cancel(); w.Stop(); <-done }
}

// podRecord is edge's record of a pod (admin API /api/v1/pod/{name}).
type podRecord struct {
	Status   string `json:"status"`
	Draining bool   `json:"is_draining"`
	Call     string `json:"allocated_call_sid"`
}

// watchPodInfo logs each change of edge's record of pod (admin API) with
// its time since t0, and calls until on each change until it returns true.
func (c *cluster) watchPodInfo(pod string, t0 time.Time, until func(podRecord, error) bool) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		last, over := "", false
		for ctx.Err() == nil {
			var info struct {
				Pod json.RawMessage `json:"pod"`
			}
			var rec podRecord
			err := c.admin.get("/api/v1/pod/"+pod, &info)
			now := ""
			if err != nil {
				now = err.Error()
			} else {
				now = string(info.Pod)
				json.Unmarshal(info.Pod, &rec)
			}
			if now != last {
				c.t.Logf("+%v edge: %s", time.Since(t0).Round(time.Millisecond), strings.TrimSpace(now))
				last = now
				if !over && until != nil {
					over = until(rec, err)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}
