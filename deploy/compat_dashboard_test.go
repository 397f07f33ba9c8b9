package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The predecessor's dashboards group by its labels (pool, status,
// endpoint); over edge's series they showed nothing. The shipped variant,
// dashboards/smart-router.json, reads only the series the recording rules
// publish, and every one of its queries returns data when Prometheus is
// fed what edge exports: each query becomes an alert that must fire in
// promtool, over the recording rules and the inputs of
// testdata/recording_rules.promtool.yaml.
func TestPredecessorDashboardShowsData(t *testing.T) {
	raw, err := os.ReadFile("dashboards/smart-router.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct {
				RefID string
				Expr  string
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	cm, _ := objects(t)["ConfigMap/smart-router-recording-rules"].(*corev1.ConfigMap)
	if cm == nil {
		t.Fatal("no ConfigMap smart-router-recording-rules in deploy/")
	}
	rules := cm.Data["smart-router.rules.yaml"]
	var groups ruleGroups
	if err := yaml.Unmarshal([]byte(rules), &groups); err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			recorded[r.Record] = true
		}
	}

	type alert struct {
		Alert  string            `json:"alert"`
		Expr   string            `json:"expr"`
		Labels map[string]string `json:"labels"`
	}
	var alerts []alert
	grouped := map[string]bool{}
	for i, p := range dash.Panels {
		for _, tgt := range p.Targets {
			for _, m := range promqlMetricNames(tgt.Expr) {
				if !recorded[m] {
					t.Errorf("panel %q queries %s, which the recording rules do not publish", p.Title, m)
				}
			}
			for _, l := range []string{"pool", "status", "endpoint"} {
				if strings.Contains(tgt.Expr, "by ("+l) || strings.Contains(tgt.Expr, ", "+l+")") {
					grouped[l] = true
				}
			}
			alerts = append(alerts, alert{
				Alert:  fmt.Sprintf("Panel%d%s", i, tgt.RefID),
				Expr:   "count(" + tgt.Expr + ") > 0",
				Labels: map[string]string{"panel": p.Title},
			})
		}
	}
	for _, l := range []string{"pool", "status", "endpoint"} {
		if !grouped[l] {
			t.Errorf("no panel groups by the predecessor's %s", l)
		}
	}
	if len(alerts) < 8 {
		t.Fatalf("found %d queries in the dashboard", len(alerts))
	}

	// The rules file with one more group: the panels' alerts.
	var file map[string][]map[string]any
	if err := yaml.Unmarshal([]byte(rules), &file); err != nil {
		t.Fatal(err)
	}
	var panelRules []any
	for _, a := range alerts {
		panelRules = append(panelRules, a)
	}
	file["groups"] = append(file["groups"], map[string]any{"name": "dashboard-panels", "rules": panelRules})
	withPanels, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}

	// One test over every input of the recording rules' tests.
	raw, err = os.ReadFile("testdata/recording_rules.promtool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var inputs promtoolTests
	if err := yaml.Unmarshal(raw, &inputs); err != nil {
		t.Fatal(err)
	}
	type series struct {
		Series string `json:"series"`
		Values string `json:"values"`
	}
	type expAlert struct {
		ExpLabels map[string]string `json:"exp_labels"`
	}
	type alertTest struct {
		EvalTime  string     `json:"eval_time"`
		Alertname string     `json:"alertname"`
		ExpAlerts []expAlert `json:"exp_alerts"`
	}
	test := struct {
		Name          string      `json:"name"`
		Interval      string      `json:"interval"`
		InputSeries   []series    `json:"input_series"`
		AlertRuleTest []alertTest `json:"alert_rule_test"`
	}{Name: "every panel of dashboards/smart-router.json shows data", Interval: "1m"}
	for _, tc := range inputs.Tests {
		for _, in := range tc.InputSeries {
			test.InputSeries = append(test.InputSeries, series{in.Series, in.Values})
		}
	}
	for _, a := range alerts {
		test.AlertRuleTest = append(test.AlertRuleTest, alertTest{EvalTime: "10m", Alertname: a.Alert,
			ExpAlerts: []expAlert{{ExpLabels: a.Labels}}})
	}
	tests, err := yaml.Marshal(map[string]any{
		"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": []any{test},
	})
	if err != nil {
		t.Fatal(err)
	}
	runPromtool(t, string(withPanels), tests)
}
