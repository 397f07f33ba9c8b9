package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/internal/seccomptest"
)

// The uring component as written: a Component whose patch decodes
// strictly into a Deployment, points the pod at a Localhost profile that
// is the file beside it, and that profile allows io_uring and refuses the
// rest with EPERM (what edge's fallback expects of a refusal). That edge
// runs under it is cmd/edge's TestUringRelayUnderTheShippedSeccompProfile.
func TestUringComponentFiles(t *testing.T) {
	dir := filepath.Join("components", "uring")
	var k struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Patches    []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	mustStrict(t, filepath.Join(dir, "kustomization.yaml"), &k)
	if k.APIVersion != "kustomize.config.k8s.io/v1alpha1" || k.Kind != "Component" || len(k.Patches) != 1 {
		t.Fatalf("kustomization = %+v, want a Component with one patch", k)
	}
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	data, err := os.ReadFile(filepath.Join(dir, k.Patches[0].Path))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := codec.Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("%s: %v", k.Patches[0].Path, err)
	}
	dep, ok := obj.(*appsv1.Deployment)
	if !ok || dep.Name != "edge" {
		t.Fatalf("the patch is a %T named %v, want Deployment edge", obj, dep)
	}
	sc := dep.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || sc.SeccompProfile.LocalhostProfile == nil {
		t.Fatalf("the patch sets no Localhost seccomp profile: %+v", sc)
	}
	p, err := seccomptest.Load(filepath.Join(dir, *sc.SeccompProfile.LocalhostProfile))
	if err != nil {
		t.Fatalf("the profile the pod names is not beside the patch: %v", err)
	}
	allowed := p.Allowed()
	for _, n := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "execve", "epoll_pwait"} {
		if !slices.Contains(allowed, n) {
			t.Errorf("the profile does not allow %s", n)
		}
	}
	// The filter binds the OCI runtime too, between loading it and
	// exec'ing edge: with no_new_privs (allowPrivilegeEscalation: false)
	// runc loads it last, then checks that /proc/self/fd is procfs and
	// closes its own descriptors through it before execve. Without these
	// the container never starts ("ensure /proc/self/fd is on procfs:
	// operation not permitted"); test/runtime-e2e runs it under runc.
	for _, n := range []string{"fstatfs", "openat", "getdents64", "close", "fcntl", "execve"} {
		if !slices.Contains(allowed, n) {
			t.Errorf("the profile does not allow %s, which runc calls after loading it", n)
		}
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != 1 {
		t.Errorf("default action %s (errno %v), want SCMP_ACT_ERRNO with EPERM", p.DefaultAction, p.DefaultErrnoRet)
	}
	for _, arch := range []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"} {
		if !slices.Contains(p.Architectures, arch) {
			t.Errorf("the profile does not cover %s", arch)
		}
	}
}

// The rendered uring overlay (kubectl kustomize, where kubectl is
// installed): still restricted (a Localhost profile is allowed), the
// plugins' /tmp still writable, and the config edge would load relays
// through io_uring with the window.
func TestUringOverlayRendered(t *testing.T) {
	docs := kustomize(t, filepath.Join("overlays", "uring"), "TestUringComponentFiles")
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	var dep *appsv1.Deployment
	var cm *corev1.ConfigMap
	for _, doc := range docs {
		obj, _, err := codec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("rendered object: %v\n%s", err, doc)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			dep = o
		case *corev1.ConfigMap:
			if o.Name == "edge-config" {
				cm = o
			}
		}
	}
	if dep == nil || cm == nil {
		t.Fatal("no Deployment or ConfigMap rendered")
	}
	pod := dep.Spec.Template.Spec
	for _, err := range restricted(pod) {
		t.Errorf("rendered Deployment: %v", err)
	}
	if err := pluginSocketDirWritable(pod, pod.Containers[0]); err != nil {
		t.Errorf("rendered Deployment: %v", err)
	}
	if pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost {
		t.Errorf("seccomp profile %+v, want the component's Localhost one", pod.SecurityContext.SeccompProfile)
	}
	environ := []string{"EDGE_ADMIN_TOKEN=from-the-secret-0123456789abcdef0123"}
	for _, e := range pod.Containers[0].Env {
		if e.ValueFrom == nil {
			environ = append(environ, e.Name+"="+e.Value)
		}
	}
	path := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(path, []byte(cm.Data["edge.yaml"]), 0o600)
	cfg, err := config.Load([]string{"--config", path}, environ)
	if err != nil {
		t.Fatalf("the overlay's config: %v", err)
	}
	if cfg.Proxy.Relay != "uring" || cfg.Proxy.UringBatch.String() != "1ms" {
		t.Errorf("proxy.relay %q, uring_batch %v; want uring and 1ms", cfg.Proxy.Relay, cfg.Proxy.UringBatch)
	}
}
