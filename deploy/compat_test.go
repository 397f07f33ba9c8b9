package deploy

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/edge-voice/edge/config"
)

// The predecessor's agents call smart-router:8080. The
// Service of that name is cluster-internal and reaches edge's internal
// listener (the port the ConfigMap binds it to); the internet-facing
// Service reaches only the public listener, which serves neither release
// nor drain.
func TestPredecessorAddressIsTheInternalListener(t *testing.T) {
	objs := objects(t)
	svc, _ := objs["Service/smart-router"].(*corev1.Service)
	if svc == nil {
		t.Fatal("no Service smart-router in deploy/")
	}
	if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("smart-router is %s, want ClusterIP", svc.Spec.Type)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Ports[0].TargetPort.String() != "internal" {
		t.Fatalf("smart-router ports = %+v, want 8080 -> internal", svc.Spec.Ports)
	}
	public, _ := objs["Service/edge"].(*corev1.Service)
	for _, p := range public.Spec.Ports {
		if p.TargetPort.String() != "public" {
			t.Errorf("the internet-facing Service edge reaches port %s", p.TargetPort.String())
		}
	}
	dep := objs["Deployment/edge"].(*appsv1.Deployment)
	cm := objs["ConfigMap/edge-config"].(*corev1.ConfigMap)
	path := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(path, []byte(cm.Data["edge.yaml"]), 0o600)
	cfg, err := config.Load([]string{"--config", path}, []string{"EDGE_ADMIN_TOKEN=from-the-secret-0123456789abcdef0123"})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(cfg.Listen.Internal)
	found := false
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "internal" && port == strconv.Itoa(int(p.ContainerPort)) {
			found = true
		}
	}
	if !found {
		t.Errorf("the Deployment has no container port \"internal\" matching listen.internal %q", cfg.Listen.Internal)
	}
}
