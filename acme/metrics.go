package acme

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Label values. kind: why a certificate was needed; source: where a
// handshake's certificate came from.
const (
	kindFirst   = "first"
	kindRenewal = "renewal"
)

type metrics struct {
	issuances *prometheus.CounterVec // kind, result: orders this replica placed at the CA
	adopted   *prometheus.CounterVec // kind: certificates taken from Redis instead of the CA
	hits      prometheus.Counter     // handshakes answered from memory
	refused   *prometheus.CounterVec // reason: handshakes without a certificate
	waits     *prometheus.CounterVec // result: waits for another replica's issuance
	expiry    *prometheus.GaugeVec   // domain (from config, bounded)
	// gateRefused counts CA requests autocert tried without the lock.
	gateRefused prometheus.Counter
}

// newMetrics registers ACME's metrics on reg (nil: unregistered).
func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		issuances: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_acme_issuances_total",
			Help: "Certificates this replica asked the ACME CA for, holding the issuance lock, by kind (first, renewal) and result (ok, error).",
		}, []string{"kind", "result"}),
		adopted: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_acme_store_loads_total",
			Help: "Certificates loaded from the Redis store (obtained by another replica or an earlier run) instead of asking the CA, by kind (first, renewal).",
		}, []string{"kind"}),
		hits: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_acme_cache_hits_total",
			Help: "TLS handshakes answered with a certificate held in memory.",
		}),
		refused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_acme_handshakes_refused_total",
			Help: "TLS handshakes given no certificate, by reason (host: not in tls.acme.domains; unavailable: none could be loaded or obtained in time).",
		}, []string{"reason"}),
		waits: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_acme_lock_waits_total",
			Help: "Waits for another replica's issuance instead of asking the CA, by result (done, failed, timeout).",
		}, []string{"result"}),
		expiry: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edge_acme_certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the certificate this replica serves, per configured domain, as a Unix time.",
		}, []string{"domain"}),
		gateRefused: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_acme_ca_requests_refused_total",
			Help: "Requests to the CA that autocert's own timers tried outside this replica's issuance lock, refused (edge renews under the lock instead).",
		}),
	}
}
