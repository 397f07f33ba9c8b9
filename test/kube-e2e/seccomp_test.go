package kubee2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/seccomptest"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
)

// deploy/components/uring's seccomp profile, enforced by the kernel, on the
// parts cmd/edge's test of it does not reach: the Kubernetes pod source
// (client-go over TLS to a real API server, its informer's watch), the
// Lease election, a real Redis over TCP. edge registers a pod the API
// server reports ready, leads, and stops cleanly; a system call outside
// the profile would crash it with SIGSYS.
func TestEdgeWithKubernetesUnderTheUringSeccompProfile(t *testing.T) {
	c := need(t)
	launcher, env := seccomptest.Launcher(t, edgetest.Binary(t))
	admin := c.client(t, adminToken)
	ns := namespace(t, admin)
	redisSrv := testredis.Start(t, testredis.TCP())
	cfgPath := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`redis: {url: %q}
pods: {source: kubernetes, namespace: %s, label_selector: app=voice-agent, pod_port: 8000, kubeconfig: %q}
leader: {lease_duration: 4s, renew_deadline: 2s, retry_period: 1s}
pool: {reconcile_interval: 1s, zombie_sweep_interval: 1s}
proxy: {relay: uring, uring_batch: 1ms}
`, redisSrv.URL(), ns, c.kubeconfig(t, edgeToken))), 0o600)
	env = append(env, "EDGE_LEADER__IDENTITY=edge-sc", "TMPDIR="+t.TempDir())
	edge := edgetest.StartBinary(t, launcher, []string{"--config", cfgPath}, env...)

	testwait.Until(t, 30*time.Second, "edge leads", func() bool { return leaseHolder(admin, ns) == "edge-sc" && isLeader(edge) })
	if _, err := admin.CoreV1().Pods(ns).Create(context.Background(), newPod(ns, "agent-sc", "voice-agent"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	markReady(t, admin, ns, "agent-sc", "10.3.0.1", true)
	rdb := redisSrv.Client()
	testwait.Until(t, 20*time.Second, "the pod registered from the watch", func() bool {
		return rdb.Exists(context.Background(), allocator.NewKeys("").PodTier("agent-sc")).Val() == 1
	})
	if !edge.Stop(30 * time.Second) {
		t.Fatal("edge did not stop within 30s of SIGTERM")
	}
	if code := edge.ExitCode(); code != 0 || strings.Contains(edge.Log(), "SIGSYS") {
		t.Fatalf("exit code %d under the profile:\n%s", code, edge.Log())
	}
	if strings.Contains(edge.Log(), "uring relay unavailable") {
		t.Errorf("the profile refused io_uring:\n%s", edge.Log())
	}
}
