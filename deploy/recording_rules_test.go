package deploy

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/poolmgr"
)

// predecessorSeries are the series the predecessor's binary exports, each
// with the labels it carries (besides Prometheus' target labels): its
// /metrics as a real Prometheus scraped it, run beside edge on one Redis
// (docs/migration.md, "Metrics"). Its design documents (the seeds) name
// other series (allocations_total{source_pool,result}, active_calls,
// pool_available_pods{tier}, ...) that the binary does not export under
// those names.
var predecessorSeries = map[string][]string{
	"smart_router_allocations_total":       {"pool", "status"},
	"smart_router_releases_total":          {"pool", "status"},
	"smart_router_active_calls":            nil,
	"smart_router_drains_total":            nil,
	"smart_router_leader_status":           nil,
	"smart_router_panics_recovered_total":  nil,
	"smart_router_zombies_recovered_total": nil,
	"http_requests_total":                  {"method", "endpoint", "status"},
	"http_request_duration_seconds_bucket": {"method", "endpoint", "status", "le"},
	"http_request_duration_seconds_sum":    {"method", "endpoint", "status"},
	"http_request_duration_seconds_count":  {"method", "endpoint", "status"},
	"smart_router_pool_available_pods":     {"tier"}, // the seeds' dashboards
	"smart_router_pool_assigned_pods":      {"tier"}, // the seeds' dashboards
}

// predecessorValues are the values the predecessor's binary writes in a
// label, per series (same source as predecessorSeries): an allocation's
// status is success, no_pods or storage_error, a release's only success;
// an HTTP status is the numeric code and an endpoint a route pattern of
// its (/api/v1/pod/{pod_name}), never one of edge's own scrape and probe
// routes. A label absent from a sample has the value "".
var predecessorValues = map[string]map[string]*regexp.Regexp{
	"smart_router_allocations_total": {
		"status": regexp.MustCompile(`^(success|no_pods|storage_error)$`),
		"pool":   regexp.MustCompile(`^(|pool:[^:]+|merchant:.+)$`),
	},
	"smart_router_releases_total":          {"status": regexp.MustCompile(`^success$`)},
	"http_requests_total":                  httpValues,
	"http_request_duration_seconds_bucket": httpValues,
	"http_request_duration_seconds_sum":    httpValues,
	"http_request_duration_seconds_count":  httpValues,
}

var httpValues = map[string]*regexp.Regexp{
	"status":   regexp.MustCompile(`^[1-5][0-9][0-9]$`),
	"endpoint": regexp.MustCompile(`^/api/v1/[a-z0-9/{}_]*$`),
}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance", "pod", "namespace"}

type promtoolTests struct {
	RuleFiles          []string `json:"rule_files"`
	EvaluationInterval string   `json:"evaluation_interval"`
	Tests              []struct {
		Name        string `json:"name"`
		Interval    string `json:"interval"`
		InputSeries []struct {
			Series string `json:"series"`
			Values string `json:"values"`
		} `json:"input_series"`
		PromqlExprTest []struct {
			Expr       string `json:"expr"`
			EvalTime   string `json:"eval_time"`
			ExpSamples []struct {
				Labels string  `json:"labels"`
				Value  float64 `json:"value"`
			} `json:"exp_samples"`
		} `json:"promql_expr_test"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			EvalTime  string `json:"eval_time"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// Every series the predecessor's binary exports is recorded, with its
// name and its labels, from what edge exports: promtool's unit tests
// (testdata/recording_rules.promtool.yaml) feed the rules series named and
// labelled as edge's own collectors describe them (checked here), and
// expect each of the predecessor's series with exactly its labels.
func TestRecordingRulesPublishThePredecessorsSeries(t *testing.T) {
	cm, _ := objects(t)["ConfigMap/smart-router-recording-rules"].(*corev1.ConfigMap)
	if cm == nil {
		t.Fatal("no ConfigMap smart-router-recording-rules in deploy/")
	}
	rules := cm.Data["smart-router.rules.yaml"]
	var file struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Record string
				Expr   string
			}
		}
	}
	if err := yaml.UnmarshalStrict([]byte(rules), &file); err != nil {
		t.Fatalf("rules file: %v", err)
	}
	exported := edgeSeries(t)
	recorded := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if recorded[r.Record] {
				t.Errorf("%s is recorded twice", r.Record)
			}
			recorded[r.Record] = true
			names := promqlMetricNames(r.Expr)
			if len(names) == 0 {
				t.Errorf("%s: expression %q names no metric", r.Record, r.Expr)
			}
			for _, m := range names {
				if _, ok := exported[m]; !ok {
					t.Errorf("%s: expression %q reads %s, which edge does not export", r.Record, r.Expr, m)
				}
			}
		}
	}
	for s := range predecessorSeries {
		if !recorded[s] {
			t.Errorf("the predecessor's %s is not recorded", s)
		}
	}

	raw, err := os.ReadFile("testdata/recording_rules.promtool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests promtoolTests
	if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
		t.Fatalf("testdata/recording_rules.promtool.yaml: %v", err)
	}
	// The input is what edge exports: its names, exactly its labels.
	for _, tc := range tests.Tests {
		for _, in := range tc.InputSeries {
			name, labels := parseSeries(t, in.Series)
			want, ok := exported[name]
			if !ok {
				t.Errorf("%s: input %s is not a series edge exports", tc.Name, name)
				continue
			}
			if got := withoutTargetLabels(labels); !slices.Equal(got, want) {
				t.Errorf("%s: input %s has labels %v; edge exports it with %v", tc.Name, in.Series, got, want)
			}
		}
	}
	// Every series of the predecessor is expected with its labels and no
	// other (a label with an empty value, such as the pool of a refused
	// allocation, is absent in Prometheus: some samples lack it).
	expected := map[string][]string{}
	for _, tc := range tests.Tests {
		for _, e := range tc.PromqlExprTest {
			for _, s := range e.ExpSamples {
				name, labels := parseSeries(t, s.Labels)
				want, ok := predecessorSeries[name]
				if !ok {
					continue
				}
				expected[name] = append(expected[name], withoutTargetLabels(labels)...)
				for _, l := range withoutTargetLabels(labels) {
					if !slices.Contains(want, l) {
						t.Errorf("%s: expected %s has label %s, which the predecessor's series has not", tc.Name, s.Labels, l)
					}
				}
				values := labelValues(s.Labels)
				for l, re := range predecessorValues[name] {
					if !re.MatchString(values[l]) {
						t.Errorf("%s: expected %s has %s=%q, a value the predecessor's binary never writes there (%s)", tc.Name, s.Labels, l, values[l], re)
					}
				}
				if name == "smart_router_allocations_total" && values["status"] == "no_pods" && values["pool"] != "" {
					t.Errorf("%s: expected %s: the predecessor's no_pods has no pool", tc.Name, s.Labels)
				}
			}
		}
	}
	// An alert on the predecessor's no_pods, as its operators wrote
	// alerts, fires over the recorded series.
	fires := false
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			fires = fires || a.Alertname == "SmartRouterNoPods" && len(a.ExpAlerts) > 0
		}
	}
	if !fires {
		t.Error("no promtool test expects SmartRouterNoPods (testdata/predecessor_alerts.yaml) to fire")
	}
	for s, want := range predecessorSeries {
		got, ok := expected[s]
		if !ok {
			t.Errorf("no promtool test expects the predecessor's %s", s)
		}
		for _, l := range want {
			if !slices.Contains(got, l) {
				t.Errorf("no promtool test expects the predecessor's %s with its label %s", s, l)
			}
		}
	}
	runPromtool(t, rules, raw)
}

// runPromtool runs `promtool test rules` on the rules and the tests.
func runPromtool(t *testing.T, rules string, tests []byte) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run `make deps` (Debian's prometheus package ships it)")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o600)
	os.WriteFile(filepath.Join(dir, "tests.yaml"), tests, 0o600)
	// Alerts written on the predecessor's series, for tests that load them.
	alerts, err := os.ReadFile("testdata/predecessor_alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "predecessor_alerts.yaml"), alerts, 0o600)
	cmd := exec.Command(promtool, "test", "rules", "tests.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// edgeSeries is every series name edge's collectors describe (a
// histogram's as _bucket, _sum and _count) with its label names, sorted:
// the allocator's, its pool collector's, the pool manager's and a
// listener's.
func edgeSeries(t *testing.T) map[string][]string {
	t.Helper()
	rec := &descRecorder{series: map[string][]string{}}
	a, err := allocator.New(nil, allocator.Config{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.MustRegister(allocator.NewPoolCollector(a))
	poolmgr.NewMetrics(rec)
	ln, err := api.NewListener("internal", "127.0.0.1:0", nil, api.ListenerConfig{}, slog.New(slog.DiscardHandler), rec)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return rec.series
}

// descRecorder is a prometheus.Registerer that keeps the descriptions of
// what is registered on it.
type descRecorder struct {
	series map[string][]string
}

var descPattern = regexp.MustCompile(`fqName: "([^"]+)".*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}`)

func (r *descRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		if m == nil {
			continue
		}
		var labels []string
		for _, part := range []string{m[2], m[3]} {
			for _, l := range strings.Split(part, ",") {
				if name, _, _ := strings.Cut(strings.TrimSpace(l), "="); name != "" {
					labels = append(labels, name)
				}
			}
		}
		sort.Strings(labels)
		if !isHistogram(c) {
			r.series[m[1]] = labels
			continue
		}
		r.series[m[1]+"_bucket"] = sortedWith(labels, "le")
		r.series[m[1]+"_sum"] = labels
		r.series[m[1]+"_count"] = labels
	}
	return nil
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		r.Register(c)
	}
}

func (r *descRecorder) Unregister(prometheus.Collector) bool { return true }

func isHistogram(c prometheus.Collector) bool {
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		return true
	}
	return false
}

func sortedWith(labels []string, more string) []string {
	out := append(slices.Clone(labels), more)
	sort.Strings(out)
	return out
}

// parseSeries splits `name{a="x",b="y"}` into the name and its sorted
// label names.
func parseSeries(t *testing.T, s string) (string, []string) {
	t.Helper()
	name, rest, _ := strings.Cut(s, "{")
	rest = strings.TrimSuffix(strings.TrimSpace(rest), "}")
	var labels []string
	for _, m := range regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"[^"]*"`).FindAllStringSubmatch(rest, -1) {
		labels = append(labels, m[1])
	}
	sort.Strings(labels)
	return strings.TrimSpace(name), labels
}

// labelValues is the label values of `name{a="x",b="y"}`.
func labelValues(s string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(s, -1) {
		out[m[1]] = m[2]
	}
	return out
}

func withoutTargetLabels(labels []string) []string {
	var out []string
	for _, l := range labels {
		if !slices.Contains(targetLabels, l) {
			out = append(out, l)
		}
	}
	return out
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
