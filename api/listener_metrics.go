package api

import "github.com/prometheus/client_golang/prometheus"

type listenerMetric struct {
	open         prometheus.Gauge
	shed         *prometheus.CounterVec
	acceptErrors prometheus.Counter
}

func listenerMetrics(reg prometheus.Registerer, name string) *listenerMetric {
	labels := prometheus.Labels{"listener": name}
	m := &listenerMetric{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edge_http_connections", Help: "Connections a listener holds (media sockets excluded once upgraded).", ConstLabels: labels,
		}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_http_connections_shed_total", Help: "Connections closed to stay under http.max_connections, by what they were doing (idle, slow).", ConstLabels: labels,
		}, []string{"reason"}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edge_http_accept_errors_total", Help: "Failed accepts (e.g. out of file descriptors).", ConstLabels: labels,
		}),
	}
	if reg != nil {
		reg.MustRegister(m.open, m.shed, m.acceptErrors)
	}
	return m
}
