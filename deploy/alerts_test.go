package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// prometheusRule is the part of the Prometheus operator's PrometheusRule
// that edge ships, decoded strictly so a misspelt field fails.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec ruleGroups `json:"spec"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

// crdKinds are the manifests of custom resources, which the strict decode
// into client-go's types (objects) cannot know; their own tests check them.
var crdKinds = map[string]bool{"monitoring.coreos.com/v1": true, "keda.sh/v1alpha1": true}

func readRule(t *testing.T, path string) prometheusRule {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r prometheusRule
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if r.APIVersion != "monitoring.coreos.com/v1" || r.Kind != "PrometheusRule" {
		t.Fatalf("%s: %s/%s, want a monitoring.coreos.com/v1 PrometheusRule", path, r.APIVersion, r.Kind)
	}
	return r
}

// The alert rules pass promtool's unit tests (every alert fires on its
// cause and stays quiet on a look-alike), each names only metrics edge
// exports, and each links to a runbook section that exists.
func TestAlerts(t *testing.T) {
	rule := readRule(t, "monitoring/alerts.yaml")
	runbook, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(runbook), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			anchors[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	source := goSource(t, "..")
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			for _, m := range metricNames(r.Expr) {
				if !strings.Contains(source, `"`+m+`"`) {
					t.Errorf("alert %s queries %s, which edge does not export", r.Alert, m)
				}
			}
			url := r.Annotations["runbook_url"]
			_, anchor, _ := strings.Cut(url, "docs/operations.md#")
			if anchor == "" || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q names no section of docs/operations.md", r.Alert, url)
			}
			if sev := r.Labels["severity"]; sev != "page" && sev != "warning" {
				t.Errorf("alert %s: severity %q, want page or warning", r.Alert, sev)
			}
		}
	}
	if alerts < 8 {
		t.Fatalf("found %d alerts", alerts)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run `make deps` (Debian's prometheus package ships it)")
	}
	dir := t.TempDir()
	spec, err := yaml.Marshal(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("testdata/alerts.promtool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o600)
	os.WriteFile(filepath.Join(dir, "tests.yaml"), tests, 0o600)
	cmd := exec.Command(promtool, "test", "rules", "tests.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

var metricPattern = regexp.MustCompile(`\b([a-z_]+_(?:total|seconds|sockets|calls|pods|progress|up|leader|bytes|ratio))(?:_bucket|_sum|_count)?\b`)

// metricNames lists the metric names a PromQL expression reads.
func metricNames(expr string) []string {
	var out []string
	for _, m := range metricPattern.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}
