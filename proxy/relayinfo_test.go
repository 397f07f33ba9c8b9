package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A replica scraped between its listeners opening and the proxy's Run
// starting the loops exported no edge_proxy_relay_info at all, and an
// alert reads it: it is there from New, naming the relay new sockets take
// at that moment (the uring tests check it follows Run's fallback).
func TestRelayInfoIsExportedFromNew(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(DefaultConfig(), nil, nil, NewSigner([]byte("0123456789abcdef0123456789abcdef"), 0), nil, nil, reg)
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
