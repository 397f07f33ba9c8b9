package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/edge-voice/edge/config"
)

// objects decodes every manifest under deploy/ strictly (unknown or
// duplicate fields fail) into the API types, and checks that every
// kustomization lists files that exist.
func objects(t *testing.T) map[string]runtime.Object {
	t.Helper()
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	out := map[string]runtime.Object{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir // fixtures of the tests, not manifests
		}
		if err == nil && d.IsDir() && (path == "overlays" || path == "components") {
			return filepath.SkipDir // patches, not objects: overlays_test.go
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if d.Name() == "kustomization.yaml" {
			var k struct {
				APIVersion string           `json:"apiVersion"`
				Kind       string           `json:"kind"`
				Namespace  string           `json:"namespace"`
				Labels     []map[string]any `json:"labels"`
				Resources  []string         `json:"resources"`
			}
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			for _, r := range k.Resources {
				if _, err := os.Stat(filepath.Join(filepath.Dir(path), r)); err != nil {
					t.Errorf("%s: resource %s: %v", path, r, err)
				}
			}
			return nil
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			var head struct {
				APIVersion string `json:"apiVersion"`
			}
			if yaml.Unmarshal(doc, &head) == nil && crdKinds[head.APIVersion] {
				continue
			}
			obj, gvk, err := codec.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s (document %d): %v", path, i, err)
				continue
			}
			out[gvk.Kind+"/"+obj.(interface{ GetName() string }).GetName()] = obj
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestManifests(t *testing.T) {
	objs := objects(t)
	for _, want := range []string{"Deployment/edge", "Service/edge", "Service/edge-admin", "ServiceAccount/edge",
		"Role/edge", "RoleBinding/edge", "ConfigMap/edge-config", "PodDisruptionBudget/edge", "StatefulSet/voice-agent"} {
		if objs[want] == nil {
			t.Errorf("missing %s", want)
		}
	}
	dep, _ := objs["Deployment/edge"].(*appsv1.Deployment)
	cm, _ := objs["ConfigMap/edge-config"].(*corev1.ConfigMap)
	if dep == nil || cm == nil {
		t.Fatal("no Deployment or ConfigMap")
	}

	// The ConfigMap's edge.yaml is a valid edge config with the environment
	// the Deployment gives it: the admin token comes from a Secret that the
	// Deployment requires (its admin listener is reachable in the cluster,
	// which edge refuses without a token).
	path := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(path, []byte(cm.Data["edge.yaml"]), 0o600)
	if _, err := config.Load([]string{"--config", path}, nil); err == nil || !strings.Contains(err.Error(), "admin_token") {
		t.Fatalf("ConfigMap edge.yaml without the admin token Secret: %v, want refused", err)
	}
	var adminSecret *corev1.SecretKeySelector
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, env := range c.Env {
			if env.Name == "EDGE_ADMIN_TOKEN" && env.ValueFrom != nil {
				adminSecret = env.ValueFrom.SecretKeyRef
			}
		}
	}
	if adminSecret == nil || adminSecret.Optional == nil || *adminSecret.Optional {
		t.Fatalf("EDGE_ADMIN_TOKEN must come from a required Secret key, got %+v", adminSecret)
	}
	cfg, err := config.Load([]string{"--config", path}, []string{"EDGE_ADMIN_TOKEN=from-the-secret-0123456789abcdef0123"})
	if err != nil {
		t.Fatalf("ConfigMap edge.yaml: %v", err)
	}

	if *dep.Spec.Replicas != 3 {
		t.Errorf("replicas = %d", *dep.Spec.Replicas)
	}
	pod := dep.Spec.Template.Spec
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	drain := cfg.HTTP.ShutdownDelay + max(cfg.Proxy.DrainTimeout, cfg.HTTP.ShutdownTimeout)
	if grace < drain || grace > drain+5*time.Minute {
		t.Errorf("terminationGracePeriodSeconds %v does not match http.shutdown_delay %v + proxy.drain_timeout %v", grace, cfg.HTTP.ShutdownDelay, cfg.Proxy.DrainTimeout)
	}
	if cfg.HTTP.ShutdownDelay < 5*time.Second {
		t.Errorf("http.shutdown_delay %v: kube-proxy and load balancers take seconds to stop sending to an unready pod", cfg.HTTP.ShutdownDelay)
	}
	c := pod.Containers[0]
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe.HTTPGet.Port.String() != "admin" {
		t.Error("probes must be /readyz and /healthz on the admin port")
	}
	if err := pluginSocketDirWritable(pod, c); err != nil {
		t.Error(err)
	}
	// Replicas spread over nodes, and the GC knows the memory limit.
	spread := map[string]bool{}
	for _, tsc := range pod.TopologySpreadConstraints {
		spread[tsc.TopologyKey] = tsc.LabelSelector != nil && tsc.LabelSelector.MatchLabels["app"] == dep.Spec.Selector.MatchLabels["app"]
	}
	if !spread["kubernetes.io/hostname"] || !spread["topology.kubernetes.io/zone"] {
		t.Errorf("replicas are not spread over nodes and zones: %+v", pod.TopologySpreadConstraints)
	}
	memLimit := false
	for _, e := range c.Env {
		memLimit = memLimit || e.Name == "GOMEMLIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.memory"
	}
	if _, limited := c.Resources.Limits[corev1.ResourceMemory]; !limited || !memLimit {
		t.Error("GOMEMLIMIT does not follow the container's memory limit")
	}
	for _, err := range restricted(pod) {
		t.Errorf("Deployment/edge: %v", err)
	}
	identity := false
	for _, e := range c.Env {
		if e.Name == "EDGE_LEADER__IDENTITY" && e.ValueFrom != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			identity = true
		}
	}
	if !identity {
		t.Error("leader identity is not the pod name (downward API)")
	}
	if pod.ServiceAccountName != "edge" {
		t.Error("Deployment does not use the edge ServiceAccount")
	}

	role := objs["Role/edge"].(*rbacv1.Role)
	verbs := map[string]string{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			verbs[res] = strings.Join(r.Verbs, ",")
		}
	}
	if verbs["pods"] != "get,list,watch" || verbs["leases"] != "get,create,update,watch" {
		t.Errorf("RBAC verbs = %v", verbs)
	}

	sts := objs["StatefulSet/voice-agent"].(*appsv1.StatefulSet)
	agent := sts.Spec.Template.Spec.Containers[0]
	script := strings.Join(agent.Lifecycle.PreStop.Exec.Command, " ")
	if !strings.Contains(script, "/api/v1/drain") || !strings.Contains(script, "/api/v1/pod/$POD_NAME") {
		t.Errorf("voice-agent preStop does not drain and wait: %s", script)
	}
	// The drain names the instance: a force-deleted pod's preStop runs on
	// while the StatefulSet's replacement takes the name.
	podIP := false
	for _, e := range agent.Env {
		podIP = podIP || e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
	}
	if !podIP || !strings.Contains(script, `\"pod_ip\":\"$POD_IP\"`) {
		t.Errorf("voice-agent preStop drains by name alone (want POD_IP from status.podIP sent as pod_ip): %s", script)
	}
	if sts.Spec.Template.Labels["app"] != "voice-agent" || cfg.Pods.LabelSelector != "app=voice-agent" {
		t.Error("voice-agent labels do not match pods.label_selector")
	}
}

// pluginSocketDirWritable checks that c can create files where the provider
// plugins put their sockets: TMPDIR, else /tmp (go-plugin's os.TempDir).
// With a read-only root filesystem that takes a writable volume mounted
// there; edge refuses to start without one.
func pluginSocketDirWritable(pod corev1.PodSpec, c corev1.Container) error {
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		return nil
	}
	dir := "/tmp"
	for _, e := range c.Env {
		if e.Name == "TMPDIR" {
			dir = e.Value
		}
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir || m.ReadOnly {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return nil
			}
		}
	}
	return fmt.Errorf("container %s has a read-only root filesystem and no writable emptyDir at %s, where the provider plugins create their sockets", c.Name, dir)
}

// restricted lists where pod breaks the Pod Security Standard "restricted"
// (Kubernetes' pod-security-admission, latest version), so that a
// namespace that enforces it admits edge.
func restricted(pod corev1.PodSpec) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		bad("host namespaces")
	}
	for _, v := range pod.Volumes {
		switch {
		case v.ConfigMap != nil, v.CSI != nil, v.DownwardAPI != nil, v.EmptyDir != nil, v.Ephemeral != nil,
			v.PersistentVolumeClaim != nil, v.Projected != nil, v.Secret != nil:
		default:
			bad("volume %s is of a type restricted forbids", v.Name)
		}
	}
	podSC := pod.SecurityContext
	if podSC == nil {
		podSC = &corev1.PodSecurityContext{}
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if sc.Privileged != nil && *sc.Privileged {
			bad("container %s is privileged", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			bad("container %s: allowPrivilegeEscalation must be false", c.Name)
		}
		nonRoot := sc.RunAsNonRoot
		if nonRoot == nil {
			nonRoot = podSC.RunAsNonRoot
		}
		if nonRoot == nil || !*nonRoot || sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			bad("container %s must run as non-root", c.Name)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = podSC.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost {
			bad("container %s: seccompProfile must be RuntimeDefault or Localhost", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			bad("container %s must drop ALL capabilities", c.Name)
		} else if add := slices.DeleteFunc(slices.Clone(sc.Capabilities.Add), func(c corev1.Capability) bool { return c == "NET_BIND_SERVICE" }); len(add) > 0 {
			bad("container %s adds capabilities %v", c.Name, add)
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				bad("container %s uses host port %d", c.Name, p.HostPort)
			}
		}
	}
	return errs
}
