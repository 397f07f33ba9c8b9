package providers

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	up       *prometheus.GaugeVec
	restarts *prometheus.CounterVec
	// settingsRejects counts refused settings (the config reload stays
	// valid for the rest of edge, so the config rejects metric does not).
	settingsRejects *prometheus.CounterVec
	rpcSeconds      *prometheus.HistogramVec
	rpcErrors       *prometheus.CounterVec
	webhooks        *prometheus.CounterVec
	seconds         *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		up: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edge_plugin_up", Help: "1 while the provider plugin process is running and answering.",
		}, []string{"plugin"}),
		restarts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_plugin_restarts_total", Help: "Provider plugin process (re)starts after a crash, a hang or a failed start.",
		}, []string{"plugin"}),
		settingsRejects: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_plugin_settings_rejects_total", Help: "Provider settings the plugin refused (on a config reload or a restart); it kept its last good settings.",
		}, []string{"plugin"}),
		rpcSeconds: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edge_plugin_rpc_duration_seconds", Help: "Latency of RPCs to provider plugins.",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .1, .5, 2},
		}, []string{"plugin", "method"}),
		rpcErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_plugin_rpc_errors_total", Help: "RPCs to provider plugins that failed (error, deadline, plugin down).",
		}, []string{"plugin", "method"}),
		webhooks: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_provider_webhooks_total",
			Help: "Provider webhooks by outcome: allocated, answered, ended (a status callback released its call at once), ending (a status callback's call has its media socket open, which ends it), rejected, replayed, too_large, invalid_request; refused for the provider account: other_account (a status callback or repeat of another account's call), unknown_account (the plugin reported none of the provider's accounts), merchant_not_allowed (the account is not bound to the merchant); refusals about the call (at_capacity, merchant_at_cap, rate_limited, call_ended, ...); edge's own failures, answered for the number's fallback URL: redis_unavailable (Redis refused, timed out or was held), timeout, shutting_down, internal; the plugin's: unavailable (not running or not answering), plugin_error.",
		}, []string{"provider", "outcome"}),
		seconds: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edge_provider_webhook_duration_seconds", Help: "Time to answer a provider webhook, allocation included.",
			Buckets: []float64{.0005, .001, .002, .003, .005, .01, .025, .05, .1, .5, 2},
		}, []string{"provider"}),
	}
}

// zero exports a provider's series from the start, at 0, before its
// plugin first runs: alerts and dashboards read them (a panel reads 0, not
// "No data"; increase() sees the first restart) and edge_plugin_up says
// the plugin is not up yet.
func (m *metrics) zero(provider string) {
	m.up.WithLabelValues(provider).Set(0)
	m.restarts.WithLabelValues(provider)
	m.webhooks.WithLabelValues(provider, "allocated")
	m.seconds.WithLabelValues(provider)
	for _, method := range []string{"Webhook", "Answer"} {
		m.rpcSeconds.WithLabelValues(provider, method)
		m.rpcErrors.WithLabelValues(provider, method)
	}
}
