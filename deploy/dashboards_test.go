package deploy

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every metric the dashboard queries is one edge exports: its name appears
// as a string literal in edge's (non-test) Go source.
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	raw, err := os.ReadFile("dashboards/edge.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	source := goSource(t, "..")
	metric := regexp.MustCompile(`\b([a-z_]+_(?:total|seconds|sockets|calls|pods|progress|up|leader))(?:_bucket|_sum|_count)?\b`)
	queried := 0
	for _, p := range dash.Panels {
		for _, tgt := range p.Targets {
			for _, m := range metric.FindAllStringSubmatch(tgt.Expr, -1) {
				queried++
				if !strings.Contains(source, `"`+m[1]+`"`) {
					t.Errorf("panel %q queries %s, which edge does not export", p.Title, m[1])
				}
			}
		}
	}
	if queried < 10 {
		t.Fatalf("found only %d metric names in the dashboard: the pattern is broken", queried)
	}
}

func goSource(t *testing.T, root string) string {
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == ".git" || d.Name() == "kube-e2e") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The dashboard has the call-thread view: refusals by reason,
// failovers by outcome, mid-call moves by outcome and how long they take,
// ejections by reason and ejected pods per tier, socket closes by
// initiator and code.
func TestDashboardCallThread(t *testing.T) {
	raw, err := os.ReadFile("dashboards/edge.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type    string
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	row := false
	for _, p := range dash.Panels {
		if p.Type == "row" && strings.HasPrefix(p.Title, "Call thread") {
			row = true
			continue
		}
		if row {
			for _, tgt := range p.Targets {
				exprs = append(exprs, tgt.Expr)
			}
		}
	}
	if !row {
		t.Fatal("no Call thread row")
	}
	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		"sum by (result) (rate(allocations_total", "sum by (reason) (rate(edge_proxy_refused_total",
		"sum by (outcome) (rate(edge_proxy_failovers_total", "sum by (reason) (increase(edge_proxy_pod_ejections_total",
		"max by (tier) (pool_ejected_pods)", "sum by (initiator, code) (rate(edge_proxy_closes_total",
		"sum by (outcome) (rate(edge_proxy_resumptions_total",
		"histogram_quantile(0.5, sum by (le) (rate(edge_proxy_resume_seconds_bucket",
		"histogram_quantile(0.99, sum by (le) (rate(edge_proxy_resume_seconds_bucket",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the call-thread row has no query %q", want)
		}
	}
}
