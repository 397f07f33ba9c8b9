package deploy

import (
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// predecessorSeries are the series the predecessor exported (seeds 002
// "Metrics": zombies_recovered_total, active_calls, pool_available_pods,
// pool_assigned_pods; 003 allocation: allocations_total{source_pool,result};
// 004 drain: drains_total), under its smart_router_ namespace, each with
// the labels its dashboards group by.
var predecessorSeries = map[string][]string{
	"smart_router_allocations_total":       {"source_pool", "result"},
	"smart_router_active_calls":            nil,
	"smart_router_zombies_recovered_total": nil,
	"smart_router_pool_available_pods":     {"tier"},
	"smart_router_pool_assigned_pods":      {"tier"},
	"smart_router_drains_total":            nil,
}

// Issue 9, finding 6: every series the predecessor exported is recorded by
// a rule whose expression names only metrics edge exports (a string
// literal in edge's Go source), keeping the labels the series had.
func TestRecordingRulesPublishThePredecessorsSeries(t *testing.T) {
	cm, _ := objects(t)["ConfigMap/smart-router-recording-rules"].(*corev1.ConfigMap)
	if cm == nil {
		t.Fatal("no ConfigMap smart-router-recording-rules in deploy/")
	}
	var file struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Record string
				Expr   string
			}
		}
	}
	if err := yaml.UnmarshalStrict([]byte(cm.Data["smart-router.rules.yaml"]), &file); err != nil {
		t.Fatalf("rules file: %v", err)
	}
	source := goSource(t, "..")
	recorded := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if _, dup := recorded[r.Record]; dup {
				t.Errorf("%s is recorded twice", r.Record)
			}
			recorded[r.Record] = r.Expr
			names := promqlMetricNames(r.Expr)
			if len(names) == 0 {
				t.Errorf("%s: expression %q names no metric", r.Record, r.Expr)
			}
			for _, m := range names {
				if !strings.Contains(source, `"`+m+`"`) {
					t.Errorf("%s: expression %q reads %s, which edge does not export", r.Record, r.Expr, m)
				}
			}
			// Labels the series keeps must not be aggregated away.
			for _, l := range predecessorSeries[r.Record] {
				if dropsLabel(r.Expr, l) {
					t.Errorf("%s: expression %q drops label %s", r.Record, r.Expr, l)
				}
			}
		}
	}
	for s := range predecessorSeries {
		if _, ok := recorded[s]; !ok {
			t.Errorf("the predecessor's %s is not recorded", s)
		}
	}
}

var (
	labelLists = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	matchers   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]|"[^"]*"`)
	idents     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	keywords   = map[string]bool{"and": true, "or": true, "unless": true, "offset": true, "bool": true}
)

// promqlMetricNames lists the metric names a PromQL expression reads: the
// identifiers left once label lists, matchers, ranges and strings are
// removed, that are not function calls or keywords.
func promqlMetricNames(expr string) []string {
	expr = matchers.ReplaceAllString(labelLists.ReplaceAllString(expr, ""), "")
	var out []string
	for _, m := range idents.FindAllStringSubmatch(expr, -1) {
		name := strings.TrimRight(strings.TrimSuffix(strings.TrimSpace(m[0]), "("), " ")
		if m[1] != "" || keywords[name] {
			continue
		}
		out = append(out, name)
	}
	return out
}

var grouping = regexp.MustCompile(`\b(by|without)\s*\(([^)]*)\)`)

// dropsLabel reports an aggregation that removes label: one "by" list
// without it, or a "without" list with it.
func dropsLabel(expr, label string) bool {
	for _, m := range grouping.FindAllStringSubmatch(expr, -1) {
		has := false
		for _, l := range strings.Split(m[2], ",") {
			has = has || strings.TrimSpace(l) == label
		}
		if has == (m[1] == "without") {
			return true
		}
	}
	return false
}
