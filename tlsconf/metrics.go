package tlsconf

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	reloads prometheus.Counter
	errors  *prometheus.CounterVec
}

// newMetrics registers the store's metrics on reg (nil: unregistered).
// Expiry is computed at scrape time from the certificates being served, so
// it is never stale and follows every reload.
func newMetrics(s *Store, reg prometheus.Registerer) *metrics {
	labels := prometheus.Labels{"listener": s.prefix}
	m := &metrics{
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_tls_reloads_total", ConstLabels: labels,
			Help: "Certificate/key pairs re-read after their files changed and served from then on.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_tls_reload_errors_total", ConstLabels: labels,
			Help: "Changed certificate/key files that could not be used (unreadable, mismatched, expired); the last good certificate stayed. key is the setting naming the pair.",
		}, []string{"key"}),
	}
	if reg != nil {
		reg.MustRegister(m.reloads, m.errors, &expiry{s: s, desc: prometheus.NewDesc("edge_tls_certificate_expiry_seconds",
			"Seconds until a served certificate expires (negative once it has), by each of its names and the setting naming its pair.",
			[]string{"key", "name"}, labels)})
	}
	return m
}

// expiry reports each served certificate's seconds left. Its listener
// label is constant, so that the public and the admin store register side
// by side.
type expiry struct {
	s    *Store
	desc *prometheus.Desc
}

func (e *expiry) Describe(ch chan<- *prometheus.Desc) { ch <- e.desc }

func (e *expiry) Collect(ch chan<- prometheus.Metric) {
	set := e.s.set.Load()
	now := e.s.now()
	for i, c := range set.certs {
		left := c.Leaf.NotAfter.Sub(now).Seconds()
		for _, n := range names(c) {
			ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, left, e.s.pairs[i].path, n)
		}
	}
}
