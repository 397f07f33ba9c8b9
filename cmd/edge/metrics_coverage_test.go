package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testpki"
)

// Seven series the dashboard queried were absent until their first event
// (panels read "No data", and an increase() over a counter born at 1 never
// fires). A started edge, with nothing happened yet, exports every series
// an alert rule or a dashboard panel reads.
func TestEverySeriesAlertsAndDashboardsReadIsExportedFromStart(t *testing.T) {
	// With a certificate, as in production: the TLS series are the
	// certificate store's.
	ca := testpki.NewCA(t)
	sec := testpki.NewSecret(t, ca.Valid(t, "edge.example.com"))
	edge := edgetest.Start(t, nil, "EDGE_TLS__CERT_FILE="+sec.CertFile(), "EDGE_TLS__KEY_FILE="+sec.KeyFile())
	t.Cleanup(func() { edge.Stop(30e9) })
	resp, err := http.Get(edge.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	exported := map[string]bool{}
	labelsOf := map[string]map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		if labelsOf[name] == nil {
			labelsOf[name] = map[string]bool{}
		}
		for _, l := range exportedLabel.FindAllStringSubmatch(line, -1) {
			labelsOf[name][l[1]] = true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			exported[strings.TrimSuffix(name, suffix)] = true
		}
		exported[name] = true
	}

	queried := map[string][]string{}
	for _, e := range alertExprs(t, "../../deploy/monitoring/alerts.yaml") {
		for _, m := range promqlMetrics(e.expr) {
			queried[m] = append(queried[m], "alert "+e.name)
		}
	}
	for _, e := range dashboardExprs(t, "../../deploy/dashboards/edge.json") {
		for _, m := range promqlMetrics(e.expr) {
			queried[m] = append(queried[m], "panel "+e.name)
		}
	}
	var missing []string
	for m, by := range queried {
		if !exported[m] && !notFromStart[m] {
			missing = append(missing, m+" (read by "+strings.Join(by, ", ")+")")
		}
	}
	sort.Strings(missing)
	if len(queried) < 20 {
		t.Fatalf("found only %d queried series: %v", len(queried), queried)
	}
	if len(missing) > 0 {
		t.Fatalf("a started edge does not export:\n  %s", strings.Join(missing, "\n  "))
	}

	// The alerts' promtool tests feed series edge exports, with its label
	// names (Prometheus adds job, instance and pod).
	tests, err := os.ReadFile("../../deploy/testdata/alerts.promtool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range inputSeries.FindAllStringSubmatch(string(tests), -1) {
		name, labels := m[1], m[2]
		if notFromStart[name] {
			continue
		}
		have, ok := labelsOf[name]
		if !ok {
			t.Errorf("alerts.promtool.yaml feeds %s, which a started edge does not export", name)
			continue
		}
		for _, l := range promtoolLabel.FindAllStringSubmatch(labels, -1) {
			if l[1] != "job" && l[1] != "instance" && l[1] != "pod" && !have[l[1]] {
				t.Errorf("alerts.promtool.yaml feeds %s with label %s, which edge's series do not have", name, l[1])
			}
		}
	}
}

var (
	exportedLabel = regexp.MustCompile(`[{,]([a-zA-Z_][a-zA-Z0-9_]*)="`)
	inputSeries   = regexp.MustCompile(`series: '([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?'`)
	promtoolLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*=`)
)

// notFromStart are series a started edge cannot have yet: the ACME
// store's exist once tls.acme holds a certificate.
var notFromStart = map[string]bool{
	"edge_acme_certificate_expiry_timestamp_seconds": true,
}

type namedExpr struct{ name, expr string }

func alertExprs(t *testing.T, path string) []namedExpr {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert, Record, Expr string
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	var out []namedExpr
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, namedExpr{r.Alert + r.Record, r.Expr})
		}
	}
	return out
}

func dashboardExprs(t *testing.T, path string) []namedExpr {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	var out []namedExpr
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out = append(out, namedExpr{p.Title, tg.Expr})
		}
	}
	return out
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promqlGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promqlIdent     = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*\b`)
	promqlFunctions = map[string]bool{}
)

func init() {
	for _, f := range strings.Fields(`sum min max avg count stddev stdvar topk bottomk quantile count_values group
		rate irate increase delta idelta deriv predict_linear histogram_quantile label_replace label_join
		abs absent absent_over_time ceil floor round clamp clamp_min clamp_max changes resets time timestamp vector scalar
		sort sort_desc sqrt exp ln log2 log10 avg_over_time min_over_time max_over_time sum_over_time count_over_time
		last_over_time quantile_over_time stddev_over_time present_over_time day_of_month day_of_week hour minute month year
		and or unless offset bool by without on ignoring group_left group_right le inf nan Inf NaN humanize`) {
		promqlFunctions[f] = true
	}
}

// promqlMetrics is the metric names expr reads: identifiers outside label
// matchers, groupings, ranges and strings that are not PromQL's own words.
func promqlMetrics(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, "")
	expr = promqlMatchers.ReplaceAllString(expr, "")
	expr = promqlGrouping.ReplaceAllString(expr, "")
	expr = promqlRanges.ReplaceAllString(expr, "")
	var out []string
	for _, id := range promqlIdent.FindAllString(expr, -1) {
		if promqlFunctions[id] || strings.HasPrefix(id, "$") {
			continue
		}
		out = append(out, id)
	}
	return out
}
