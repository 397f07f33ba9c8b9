package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/edge-voice/edge/config"
)

// certificate is the part of cert-manager's Certificate (cert-manager.io/v1)
// the TLS overlay uses. cert-manager's CRD is not in client-go's scheme, so
// the shape is checked by strict decoding into these fields, named as in
// its API reference: a misspelt or unknown field fails.
type certificate struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
		IssuerRef  struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
		Duration    string `json:"duration"`
		RenewBefore string `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
	} `json:"spec"`
}

func (c certificate) check(t *testing.T) {
	t.Helper()
	if c.APIVersion != "cert-manager.io/v1" || c.Kind != "Certificate" || c.Spec.SecretName == "" ||
		len(c.Spec.DNSNames) == 0 || c.Spec.IssuerRef.Name == "" ||
		(c.Spec.IssuerRef.Kind != "Issuer" && c.Spec.IssuerRef.Kind != "ClusterIssuer") {
		t.Errorf("Certificate is incomplete: %+v", c)
	}
}

// The TLS overlay (deploy/overlays/tls) as written: a kustomization whose
// files exist, a Certificate of cert-manager's shape, a Deployment patch
// that decodes strictly into the API type, a JSON patch of the Service.
func TestTLSOverlayFiles(t *testing.T) {
	dir := filepath.Join("overlays", "tls")
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Patches    []struct {
			Path   string `json:"path"`
			Target *struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"target"`
		} `json:"patches"`
	}
	mustStrict(t, filepath.Join(dir, "kustomization.yaml"), &k)
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("resource %s: %v", r, err)
		}
	}
	for _, p := range k.Patches {
		if _, err := os.Stat(filepath.Join(dir, p.Path)); err != nil {
			t.Errorf("patch %s: %v", p.Path, err)
		}
	}
	var cert certificate
	mustStrict(t, filepath.Join(dir, "certificate.yaml"), &cert)
	cert.check(t)

	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	data, err := os.ReadFile(filepath.Join(dir, "deployment-tls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := codec.Decode(data, nil, nil); err != nil {
		t.Errorf("deployment-tls.yaml: %v", err)
	}
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value int    `json:"value"`
	}
	mustStrict(t, filepath.Join(dir, "service-public-tls.yaml"), &ops)
	if len(ops) != 1 || ops[0].Op != "replace" || ops[0].Value != 443 {
		t.Errorf("service patch = %+v, want the public port replaced by 443", ops)
	}
}

// The rendered overlay (kubectl kustomize, where kubectl is installed):
// the Service answers on 443 only, the Certificate's Secret is mounted as
// a directory (a subPath mount never sees a renewal) where tls.* points,
// and the ConfigMap's config with the overlay's environment is valid and
// gives providers wss:// URLs.
func TestTLSOverlayRendered(t *testing.T) {
	docs := kustomize(t, filepath.Join("overlays", "tls"), "TestTLSOverlayFiles")
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	var dep *appsv1.Deployment
	var svc *corev1.Service
	var cm *corev1.ConfigMap
	var cert *certificate
	for _, doc := range docs {
		if bytes.Contains(doc, []byte("kind: Certificate\n")) {
			cert = new(certificate)
			if err := yaml.UnmarshalStrict(doc, cert); err != nil {
				t.Fatalf("rendered Certificate: %v", err)
			}
			continue
		}
		obj, _, err := codec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			dep = o
		case *corev1.Service:
			if o.Name == "edge" {
				svc = o
			}
		case *corev1.ConfigMap:
			cm = o
		}
	}
	if dep == nil || svc == nil || cm == nil || cert == nil {
		t.Fatalf("rendered overlay lacks Deployment %v, Service %v, ConfigMap %v or Certificate %v", dep != nil, svc != nil, cm != nil, cert != nil)
	}
	cert.check(t)
	if cert.Metadata.Namespace != dep.Namespace {
		t.Errorf("Certificate in namespace %q, edge in %q", cert.Metadata.Namespace, dep.Namespace)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort.String() != "public" {
		t.Errorf("public Service ports = %+v, want 443 -> public only", svc.Spec.Ports)
	}

	c := dep.Spec.Template.Spec.Containers[0]
	for _, err := range restricted(dep.Spec.Template.Spec) {
		t.Errorf("rendered Deployment: %v", err)
	}
	if err := pluginSocketDirWritable(dep.Spec.Template.Spec, c); err != nil {
		t.Errorf("rendered Deployment: %v", err)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	certFile := env["EDGE_TLS__CERT_FILE"]
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == cert.Spec.SecretName {
				mounted = m.SubPath == "" && m.ReadOnly && filepath.Dir(certFile) == m.MountPath &&
					filepath.Dir(env["EDGE_TLS__KEY_FILE"]) == m.MountPath
			}
		}
	}
	if !mounted {
		t.Errorf("the Secret %s is not mounted read-only, without subPath, where tls.cert_file/key_file point (%v)", cert.Spec.SecretName, env)
	}

	path := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(path, []byte(cm.Data["edge.yaml"]), 0o600)
	environ := []string{"EDGE_ADMIN_TOKEN=from-the-secret-0123456789abcdef0123"}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load([]string{"--config", path}, environ)
	if err != nil {
		t.Fatalf("the overlay's config: %v", err)
	}
	if !cfg.TLS.Enabled() || !strings.HasPrefix(cfg.PublicURL(), "wss://") || !strings.HasPrefix(cfg.Providers.WebhookBaseURL, "https://") {
		t.Errorf("overlay config: tls %v, media base %q, webhook base %q", cfg.TLS.Enabled(), cfg.PublicURL(), cfg.Providers.WebhookBaseURL)
	}
}

func mustStrict(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

// kustomize renders dir with kubectl and returns its documents; the test
// skips where kubectl is not installed (checkedBy names the test that
// checks the files instead).
func kustomize(t *testing.T, dir, checkedBy string) [][]byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: the files are checked by " + checkedBy)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return bytes.Split(out, []byte("\n---\n"))
}
