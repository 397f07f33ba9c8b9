package proxy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/proxy/mediaurl"
)

// A replica scraped between its listeners opening and the proxy's Run
// starting the loops exported no edge_proxy_relay_info at all, and an
// alert reads it: it is there from New, naming the relay new sockets take
// at that moment (the uring tests check it follows Run's fallback).
func TestRelayInfoIsExportedFromNew(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(DefaultConfig(), Deps{Signer: mediaurl.NewSigner([]byte("0123456789abcdef0123456789abcdef"), 0), Registerer: reg})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	for _, mf := range mfs {
		if mf.GetName() != "edge_proxy_relay_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if m.GetGauge().GetValue() == 1 {
				got = append(got, labels)
			}
		}
	}
	if len(got) != 1 || got[0]["configured"] != "epoll" || got[0]["running"] != "goroutines" {
		t.Errorf(`edge_proxy_relay_info at 1: %v, want one series {configured="epoll",running="goroutines"}`, got)
	}
}

// The proxy's counters read by alerts and dashboards are exported at zero
// from New, each label value known in advance, so that a scrape before the
// first event finds them (and rate() has a start).
func TestCountersAreExportedFromNew(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(DefaultConfig(), Deps{Signer: mediaurl.NewSigner([]byte("0123456789abcdef0123456789abcdef"), 0), Registerer: reg})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]bool{} // name -> label values joined, in label name order
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var vals []string
			for _, l := range m.GetLabel() {
				vals = append(vals, l.GetValue())
			}
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("%s%v = %v at New, want 0", mf.GetName(), vals, m.GetCounter().GetValue())
			}
			if series[mf.GetName()] == nil {
				series[mf.GetName()] = map[string]bool{}
			}
			series[mf.GetName()][strings.Join(vals, ",")] = true
		}
	}
	want := map[string][]string{
		"edge_proxy_closes_total":                 {"1001,edge", "1008,edge", "4000,edge", "none,client", "1000,pod"},
		"edge_proxy_failovers_total":              failoverOutcomes,
		"edge_proxy_lease_renewals_total":         renewalOutcomes,
		"edge_proxy_pod_ejections_total":          append([]string{"lost"}, dialReasons...),
		"edge_proxy_refused_total":                refuseReasons,
		"edge_proxy_releases_total":               releaseOutcomes,
		"edge_proxy_upstream_dial_failures_total": dialReasons,
		"edge_proxy_pod_probes_total":             {"ok", "failed"},
	}
	for name, vals := range want {
		for _, v := range vals {
			if !series[name][v] {
				t.Errorf("%s{%s} is not exported from New (have %v)", name, v, series[name])
			}
		}
	}
}

// Every reason the admission refuses with is one created from New: a
// reason added to the code but not to the list would be missing from the
// first scrapes.
func TestRefuseReasonsAreKnown(t *testing.T) {
	src, err := os.ReadFile("admit.go")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, r := range refuseReasons {
		known[r] = true
	}
	used := regexp.MustCompile(`refuse\(w, http\.Status\w+, "(\w+)"|reason :?= "(\w+)"|status, reason = http\.Status\w+, "(\w+)"`).FindAllStringSubmatch(string(src), -1)
	if len(used) < 10 {
		t.Fatalf("found only %d refusal reasons in admit.go: %v", len(used), used)
	}
	for _, m := range used {
		r := m[1] + m[2] + m[3]
		if !known[r] {
			t.Errorf("admit.go refuses with %q, which refuseReasons lacks", r)
		}
	}
}
