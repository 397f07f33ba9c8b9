package kubee2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of a kustomization.yaml deploy/ uses.
type kustomization struct {
	Resources []string `json:"resources"`
	Patches   []struct {
		Path   string `json:"path"`
		Target *struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
}

// What a platform team applies is accepted by the real kube-apiserver:
// deploy/base's resources, then deploy/overlays/tls over them, its patches
// applied as kustomize applies them (a strategic merge for the Deployment,
// a JSON patch for the public Service) and its cert-manager Certificate,
// then deploy/components/uring's patch; a Pod of the result is admitted
// under the Pod Security Standard "restricted" by the apiserver's own
// PodSecurity admission.
// The apiserver validates what strict decoding in deploy/ cannot: the
// patched Deployment as a whole (volumes, mounts, the security context),
// the Service's ports, the RBAC objects. cert-manager's CRD is not here:
// a stand-in definition of its group and kind (any fields) lets the
// apiserver take the Certificate; its fields are checked by
// deploy/overlays_test.go.
func TestDeployManifestsAcceptedByTheAPIServer(t *testing.T) {
	c := need(t)
	ctx := context.Background()
	cfg := c.config(adminToken)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	standInCRD(t, dyn, "cert-manager.io", "Certificate", "certificates")
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	// A bare namespace: namespace() would add base's Role itself.
	ns := fmt.Sprintf("manifests-%d-%d", time.Now().Unix()%100000, nsSeq.Add(1))
	if _, err := c.client(t, adminToken).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	apply := func(obj *unstructured.Unstructured) {
		t.Helper()
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, obj.GetName(), err)
		}
		obj.SetNamespace(ns) // as kustomize's namespace: would
		if _, err := dyn.Resource(m.Resource).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Errorf("the apiserver refused %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
	}

	root := filepath.Join("..", "..", "deploy")
	base := readKustomization(t, filepath.Join(root, "base"))
	applied := map[string]schema.GroupVersionResource{} // kind/name -> resource
	for _, file := range base.Resources {
		for _, obj := range readObjects(t, filepath.Join(root, "base", file)) {
			apply(obj)
			gvk := obj.GroupVersionKind()
			m, _ := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			applied[gvk.Kind+"/"+obj.GetName()] = m.Resource
		}
	}

	overlay := readKustomization(t, filepath.Join(root, "overlays", "tls"))
	for _, file := range overlay.Resources {
		if file == "../../base" {
			continue // applied above
		}
		for _, obj := range readObjects(t, filepath.Join(root, "overlays", "tls", file)) {
			apply(obj)
		}
	}
	if len(overlay.Patches) == 0 {
		t.Fatal("the TLS overlay has no patches")
	}
	for _, p := range overlay.Patches {
		data, err := os.ReadFile(filepath.Join(root, "overlays", "tls", p.Path))
		if err != nil {
			t.Fatal(err)
		}
		body, err := yaml.YAMLToJSON(data)
		if err != nil {
			t.Fatalf("%s: %v", p.Path, err)
		}
		var key string
		patchType := types.StrategicMergePatchType
		if p.Target != nil {
			key, patchType = p.Target.Kind+"/"+p.Target.Name, types.JSONPatchType
		} else {
			var head struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(data, &head); err != nil {
				t.Fatalf("%s: %v", p.Path, err)
			}
			key = head.Kind + "/" + head.Metadata.Name
		}
		gvr, ok := applied[key]
		if !ok {
			t.Fatalf("%s patches %s, which the base does not have", p.Path, key)
		}
		if _, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, nameOf(key), patchType, body, metav1.PatchOptions{FieldValidation: "Strict"}); err != nil {
			t.Errorf("the apiserver refused %s over %s: %v", p.Path, key, err)
		}
	}

	// deploy/components/uring over the same Deployment (it composes with
	// any overlay): a strategic merge patch too.
	uring, err := os.ReadFile(filepath.Join(root, "components", "uring", "deployment-uring.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := yaml.YAMLToJSON(uring)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(applied["Deployment/edge"]).Namespace(ns).Patch(ctx, "edge", types.StrategicMergePatchType, body, metav1.PatchOptions{FieldValidation: "Strict"}); err != nil {
		t.Errorf("the apiserver refused the uring component's patch: %v", err)
	}

	// What the patches were for, read back from the apiserver.
	svc, err := dyn.Resource(applied["Service/edge"]).Namespace(ns).Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports"); len(ports) != 1 || ports[0].(map[string]any)["port"] != int64(443) {
		t.Errorf("public Service ports after the overlay = %v, want one port 443", ports)
	}
	dep, err := dyn.Resource(applied["Deployment/edge"]).Namespace(ns).Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	volumes, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	found := false
	for _, v := range volumes {
		if name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); name == "edge-tls" {
			found = true
		}
	}
	if !found {
		t.Errorf("Deployment after the overlay mounts no Secret edge-tls: volumes %v", volumes)
	}
	if p, _, _ := unstructured.NestedString(dep.Object, "spec", "template", "spec", "securityContext", "seccompProfile", "localhostProfile"); p != "edge-uring.json" {
		t.Errorf("Deployment after the uring component runs under seccomp profile %q, want edge-uring.json", p)
	}

	// The Pod Security Standard "restricted", judged by the apiserver's own
	// PodSecurity admission: a Pod of the Deployment's template is admitted
	// into a namespace that enforces it, with the component's Localhost
	// profile and with the base's RuntimeDefault; without a profile (the
	// base before it had one) it is refused.
	var spec corev1.PodSpec
	raw, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		t.Fatal(err)
	}
	strict := ns + "-restricted"
	if _, err := c.client(t, adminToken).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   strict,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	admit := func(name string, seccomp *corev1.SeccompProfile) error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *spec.DeepCopy()}
		pod.Spec.SecurityContext.SeccompProfile = seccomp
		pod.Spec.ServiceAccountName = "" // the ServiceAccount lives in the other namespace
		_, err := c.client(t, adminToken).CoreV1().Pods(strict).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}
	if err := admit("edge-uring", spec.SecurityContext.SeccompProfile); err != nil {
		t.Errorf("restricted refused the uring Deployment's pod: %v", err)
	}
	if err := admit("edge-base", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}); err != nil {
		t.Errorf("restricted refused the base Deployment's pod: %v", err)
	}
	if err := admit("edge-no-seccomp", nil); err == nil || !strings.Contains(err.Error(), "seccompProfile") {
		t.Errorf("a pod with no seccomp profile: %v, want refused by restricted (is PodSecurity admission on?)", err)
	}
}

// standInCRD defines group/kind with any fields, and waits until the
// apiserver serves it.
func standInCRD(t *testing.T, dyn dynamic.Interface, group, kind, plural string) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": plural, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	ctx := context.Background()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("stand-in CRD %s: %v", kind, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := crds.Get(ctx, plural+"."+group, metav1.GetOptions{})
		if err == nil && established(got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stand-in CRD %s not established: %v", kind, err)
		}
		time.Sleep(50 * time.Millisecond) // the apiserver has no watch here worth setting up for one condition
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	return k
}

// readObjects decodes every document of a YAML file.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// nameOf is the name in a "Kind/name" key.
func nameOf(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}
