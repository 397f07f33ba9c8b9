package poolmgr

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testwait"
)

const ns = "voice"

func pod(name string, ready bool, lbl string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": lbl}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if ready {
		setReady(p, true)
	}
	return p
}

func setReady(p *corev1.Pod, ready bool) {
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = "10.0.0.7"
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
}

// The whole life of a pod through the informer: pending (ignored), ready
// (assigned a tier, available), not ready with a live call (out of the pool,
// call kept), ready again, terminating (out at once), deleted (unregistered,
// call ended). A pod outside the selector never reaches Redis.
func TestKubePodLifecycle(t *testing.T) {
	_, rdb := startRedis(t)
	a := allocatortest.New(t, rdb)
	k := a.Keys()
	ctx := context.Background()
	client := fake.NewClientset()
	reg := NewRegistry()
	run(t, &KubeSource{Pods: fakePods{client.CoreV1().Pods(ns)}, Namespace: ns, LabelSelector: "app=voice-agent", Port: 8000, Registry: reg, Log: quietLog()})
	run(t, newManager(t, a, reg, &alwaysLeader{}))
	pods := client.CoreV1().Pods(ns)

	p := pod("agent-0", false, "voice-agent")
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod("other", true, "something-else"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "pending pod in the registry", func() bool { _, ok := reg.Get("agent-0"); return ok })
	if _, ok := reg.Lookup("other"); ok {
		t.Fatal("a pod outside the label selector was registered")
	}

	setReady(p, true)
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "ready pod available in gold", func() bool { return rdb.SIsMember(ctx, k.PoolAvailable("gold"), "agent-0").Val() })
	if addr, _ := reg.Lookup("agent-0"); addr != "10.0.0.7:8000" {
		t.Fatalf("address = %q", addr)
	}
	if al, err := a.Allocate(ctx, allocator.Request{CallID: "CA1"}); err != nil || al.PodName != "agent-0" {
		t.Fatalf("allocate = %+v, %v", al, err)
	}

	// Readiness flap with a live call: the pod still resolves, the call lives.
	setReady(p, false)
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "unready flag", func() bool { return rdb.HGet(ctx, k.PodInfo("agent-0"), "unready").Val() == "1" })
	if _, err := a.Call(ctx, "CA1"); err != nil {
		t.Fatalf("the call died with a readiness flap: %v", err)
	}
	if _, ok := reg.Lookup("agent-0"); !ok {
		t.Fatal("an unready pod with a call stopped resolving")
	}
	if rel, err := a.Release(ctx, "CA1"); err != nil || rel.Stale {
		t.Fatalf("release after the flap = %+v, %v", rel, err)
	}
	setReady(p, true)
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "ready again", func() bool { return rdb.HGet(ctx, k.PodInfo("agent-0"), "unready").Val() == "" })

	// Terminating: out of the pool at once, still known.
	if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA2"}); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	p.DeletionTimestamp = &now
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "terminating pod marked unready", func() bool { return rdb.HGet(ctx, k.PodInfo("agent-0"), "unready").Val() == "1" })
	if _, err := a.Call(ctx, "CA2"); err != nil {
		t.Fatalf("terminating pod's call ended early: %v", err)
	}

	// Deleted: unregistered, its call ended.
	if err := pods.Delete(ctx, "agent-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "deleted pod unregistered", func() bool { return rdb.Exists(ctx, k.PodTier("agent-0")).Val() == 0 })
	if _, err := a.Call(ctx, "CA2"); err == nil {
		t.Fatal("deleted pod's call still live")
	}
	if _, ok := reg.Lookup("agent-0"); ok {
		t.Fatal("deleted pod still resolves")
	}
	if rdb.Exists(ctx, k.PodTier("other")).Val() != 0 {
		t.Fatal("pod outside the selector reached Redis")
	}
}

// A new replica must not remove every pod as a ghost before its informer
// has listed them.
func TestReconcilerWaitsForSync(t *testing.T) {
	_, rdb := startRedis(t)
	a := allocatortest.New(t, rdb)
	ctx := context.Background()
	if _, err := a.SyncPods(ctx, "", []allocator.PodState{{Name: "agent-0", Address: "10.0.0.1:8000", Ready: true}}); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(pod("agent-0", true, "voice-agent"))
	reg := NewRegistry()
	m := newManager(t, a, reg, &alwaysLeader{})
	run(t, m)
	// The leader's loops run (sweeps happen) but no reconcile does until
	// the source has synced.
	testwait.Until(t, 10*time.Second, "a sweep", func() bool { return testutilCount(m, "sweep") > 1 })
	if n := testutilCount(m, "reconcile"); n != 0 {
		t.Fatalf("reconcile ran %d times before the source synced", n)
	}
	if rdb.Exists(ctx, a.Keys().PodTier("agent-0")).Val() != 1 {
		t.Fatal("pod removed before the source synced")
	}
	src := &KubeSource{Pods: fakePods{client.CoreV1().Pods(ns)}, Namespace: ns, LabelSelector: "app=voice-agent", Port: 8000, Registry: reg, Log: quietLog()}
	run(t, src)
	testwait.Until(t, 10*time.Second, "a reconcile after the sync", func() bool { return testutilCount(m, "reconcile") > 0 })
	if rdb.Exists(ctx, a.Keys().PodTier("agent-0")).Val() != 1 {
		t.Fatal("a live pod was removed as a ghost")
	}
}

// fakePods is the fake clientset's pods of one namespace. The fake cannot
// stream the initial list in a watch, and says so as the clientset does:
// the informer then lists first.
type fakePods struct{ typedcorev1.PodInterface }

func (fakePods) IsWatchListSemanticsUnSupported() bool { return true }

// leaseElector campaigns on the fake clientset's Lease ns/edge-leader.
func leaseElector(client *fake.Clientset, id string, fence LeaseFence, log *slog.Logger, lease, renew, retry time.Duration) *LockElector {
	return &LockElector{
		Lock:     &LeaseLock{Leases: client.CoordinationV1().Leases(ns), Name: "edge-leader", Fence: fence, RetryPeriod: retry, Log: log},
		Identity: id, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		Log: log, Metrics: NewMetrics(nil),
	}
}
