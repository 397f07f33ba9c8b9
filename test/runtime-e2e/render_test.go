package runtimee2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8sjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// deployDir is the module's deploy/.
func deployDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy")
}

// kustomization is the part of a kustomization.yaml that deploy/ uses to
// build edge's pod: resources (files or directories), components and
// patches. Other fields (namespace, labels) do not reach the container.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Namespace  string           `json:"namespace"`
	Labels     []map[string]any `json:"labels"`
	Resources  []string         `json:"resources"`
	Components []string         `json:"components"`
	Patches    []struct {
		Path   string `json:"path"`
		Target *struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
}

// rendered is what a kustomization makes of edge's pod: the Deployment
// and its ConfigMap after every patch, and the directories read (a
// Localhost seccomp profile ships in its component's).
type rendered struct {
	dep    *appsv1.Deployment
	config *corev1.ConfigMap
	dirs   []string
}

// render builds dir (relative to deploy/) as kustomize would for the two
// objects the container depends on: resources in order, then components,
// then the kustomization's own patches of the Deployment, applied as
// strategic merge patches (kustomize's way for a patch with no target).
func render(t *testing.T, dir string) rendered {
	t.Helper()
	var r rendered
	r.load(t, filepath.Join(deployDir(), dir))
	if r.dep == nil || r.config == nil {
		t.Fatalf("%s renders no Deployment edge or ConfigMap edge-config", dir)
	}
	return r
}

func (r *rendered) load(t *testing.T, dir string) {
	t.Helper()
	r.dirs = append(r.dirs, dir)
	var k kustomization
	if err := yaml.UnmarshalStrict(readFile(t, filepath.Join(dir, "kustomization.yaml")), &k); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	for _, res := range k.Resources {
		p := filepath.Join(dir, res)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			r.load(t, p)
			continue
		}
		r.decode(t, p)
	}
	for _, c := range k.Components {
		r.load(t, filepath.Join(dir, c))
	}
	for _, p := range k.Patches {
		if p.Target != nil && (p.Target.Kind != "Deployment" || p.Target.Name != "edge") {
			continue // another object's patch (a Service's port)
		}
		if p.Target != nil {
			t.Fatalf("%s: a targeted patch of the Deployment: teach render its kind", p.Path)
		}
		r.patch(t, filepath.Join(dir, p.Path))
	}
}

var codec = k8sjson.NewSerializerWithOptions(k8sjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	k8sjson.SerializerOptions{Yaml: true, Strict: true})

// decode keeps the Deployment edge and the ConfigMap edge-config of a
// manifest file; other objects do not reach the container.
func (r *rendered) decode(t *testing.T, path string) {
	t.Helper()
	for _, doc := range bytes.Split(readFile(t, path), []byte("\n---\n")) {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch {
		case head.Kind == "Deployment" && head.Metadata.Name == "edge",
			head.Kind == "ConfigMap" && head.Metadata.Name == "edge-config":
		default:
			continue
		}
		obj, _, err := codec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.dep = o
		case *corev1.ConfigMap:
			r.config = o
		}
	}
}

func (r *rendered) patch(t *testing.T, path string) {
	t.Helper()
	if r.dep == nil {
		t.Fatalf("%s patches a Deployment no resource gave", path)
	}
	// Strict first: a misspelt field in a patch would merge silently.
	if _, _, err := codec.Decode(readFile(t, path), nil, nil); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	patch, err := yaml.YAMLToJSON(readFile(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	orig, err := json.Marshal(r.dep)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, patch, appsv1.Deployment{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var dep appsv1.Deployment
	if err := json.Unmarshal(merged, &dep); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	r.dep = &dep
}

// localhostProfile finds the file a Localhost seccomp profile names in the
// directories rendered: what the platform team installs on the nodes.
func (r *rendered) localhostProfile(t *testing.T, name string) string {
	t.Helper()
	for _, d := range r.dirs {
		if p := filepath.Join(d, name); fileExists(p) {
			return p
		}
	}
	t.Fatalf("the Localhost seccomp profile %s is in none of %v", name, r.dirs)
	return ""
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
