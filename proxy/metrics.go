package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/edge-voice/edge/proxy/internal/relay"
)

type metrics struct {
	active       prometheus.Gauge
	maxSockets   prometheus.Gauge
	duration     prometheus.Histogram
	dirs         [2]relay.Counters // client_to_pod, pod_to_client
	closes       *prometheus.CounterVec
	refused      *prometheus.CounterVec
	dialFailures *prometheus.CounterVec
	failovers    *prometheus.CounterVec
	ejections    *prometheus.CounterVec
	probes       *prometheus.CounterVec
	renewals     *prometheus.CounterVec
	releases     *prometheus.CounterVec
	relayed      *prometheus.CounterVec
	relayInfo    *relayInfo
	uringOwnBufs prometheus.Counter
	// resumptions and resumeSeconds: calls moved mid-call (resume.go).
	resumptions *prometheus.CounterVec
	// podsLost: pods lost mid-call, by how (PodLost, Resume).
	podsLost      *prometheus.CounterVec
	resumeSeconds prometheus.Histogram
}

// newMetrics registers the proxy's metrics on reg (nil: unregistered).
func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	bytes := f.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_proxy_bytes_total",
		Help: "Bytes relayed on media sockets (WebSocket frames, headers included), by direction.",
	}, []string{"direction"})
	msgs := f.NewCounterVec(prometheus.CounterOpts{
		Name: "edge_proxy_messages_total",
		Help: "WebSocket data messages relayed on media sockets, by direction.",
	}, []string{"direction"})
	m := &metrics{
		active: f.NewGauge(prometheus.GaugeOpts{
			Name: "edge_proxy_active_sockets",
			Help: "Media sockets open on this replica.",
		}),
		maxSockets: f.NewGauge(prometheus.GaugeOpts{
			Name: "edge_proxy_max_sockets",
			Help: "The configured limit of media sockets on this replica (proxy.max_sockets; 0: none), for alerting on edge_proxy_active_sockets near it.",
		}),
		duration: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "edge_proxy_socket_duration_seconds",
			Help:    "How long media sockets lived.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}),
		closes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_closes_total",
			Help: "Media sockets closed, by who closed first (client, pod, edge) and close code (none: TCP closed without a close frame).",
		}, []string{"initiator", "code"}),
		refused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_refused_total",
			Help: "Media socket requests refused, by reason.",
		}, []string{"reason"}),
		dialFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_upstream_dial_failures_total",
			Help: "Failed dials or WebSocket handshakes to pods, by reason (refused, reset, timeout, status, handshake, unknown, other); the log names the pod.",
		}, []string{"reason"}),
		failovers: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_failovers_total",
			Help: "Connect-time failovers, by outcome: moved (a call moved to another pod), connected (a socket opened after a move), no_pod, exhausted (every dial failed), kept_for_retry (after no_pod or exhausted, the call kept for its provider's retry of the handshake instead of ended), error.",
		}, []string{"outcome"}),
		ejections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_pod_ejections_total",
			Help: "Pods this replica ejected from allocation (on every replica), by reason of the failure (as dial failures, plus lost: died mid-call).",
		}, []string{"reason"}),
		probes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_pod_probes_total",
			Help: "Health probes of ejected pods, by outcome (ok: the pod is back, failed).",
		}, []string{"outcome"}),
		renewals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_lease_renewals_total",
			Help: "Lease renewals of open media sockets, by outcome (held, lost, error).",
		}, []string{"outcome"}),
		releases: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_releases_total",
			Help: "Calls released when their media socket ended, by outcome (released, stale, not_found, retrying: Redis was unreachable and the release is retried until it answers, error).",
		}, []string{"outcome"}),
		relayed: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_relayed_sockets_total",
			Help: "Media sockets relayed, by relay (epoll, uring, goroutines: the fallback) and client transport (tcp, tls: terminated in edge).",
		}, []string{"relay", "client"}),
		relayInfo: &relayInfo{desc: prometheus.NewDesc(
			"edge_proxy_relay_info",
			"1 for the relay proxy.relay configured and the one new sockets take: they differ where io_uring (or epoll) is refused and edge fell back, and until the loops have started.",
			[]string{"configured", "running"}, nil)},
		resumptions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_resumptions_total",
			Help: "Calls whose pod died mid-call, by outcome: not_enabled (the call may not move: proxy.resume does not cover it, or its provider names no opening), resumed (moved to another pod, the caller kept), no_pod, dial_failed, limit (proxy.resume.max_per_call), poison (the pod moved to died within proxy.resume.poison_window of the replay, having sent nothing), rate_limited (proxy.resume.max_per_merchant_per_minute), torn (the dead pod left the client inside a message), no_opening, opening_mismatch, refused (the new pod answered 4xx, or its 101 did not match the first's), error; every outcome but resumed ends the call with 1014.",
		}, []string{"outcome"}),
		podsLost: f.NewCounterVec(prometheus.CounterOpts{
			Name: "edge_proxy_pods_lost_total",
			Help: "Pods lost mid-call, by cause: reset (the connection failed), eof (FIN without a close frame), stalled (no writes taken for proxy.pod_write_timeout), hung (no answer to edge's ping for proxy.pod_silence), left (the pod left the registry); each is followed by a resumption outcome.",
		}, []string{"cause"}),
		resumeSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "edge_proxy_resume_seconds",
			Help:    "How long a resumed call's move took: the new pod allocated, dialled and given the stream's opening again.",
			Buckets: []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		uringOwnBufs: f.NewCounter(prometheus.CounterOpts{
			Name: "edge_proxy_uring_buffer_ring_empty_total",
			Help: "Receives of the uring relay that found the loop's buffer ring empty and used a buffer of the socket's own.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.relayInfo)
	}
	for i, d := range []string{"client_to_pod", "pod_to_client"} {
		m.dirs[i] = relay.Counters{Bytes: bytes.WithLabelValues(d), Messages: msgs.WithLabelValues(d)}
	}
	m.fromStart()
	return m
}

// Label values known in advance, created at zero by New so that each
// series is exported from the first scrape (an alert's rate() or absence
// check needs it before the first event).
var (
	refuseReasons = []string{"bad_path", "unknown_pod", "not_websocket", "bad_token", "expired_token", "shutting_down",
		"no_allocation", "duplicate", "redis_error", "upstream", "hijack", "overloaded", "unsigned_query", "pod_refused"}
	// dialReasons are dialReason's labels.
	dialReasons      = []string{"refused", "reset", "timeout", "status", "handshake", "unknown", "other"}
	failoverOutcomes = []string{"moved", "connected", "no_pod", "exhausted", "kept_for_retry", "error"}
	renewalOutcomes  = []string{"held", "lost", "error"}
	releaseOutcomes  = []string{"released", "stale", "not_found", "retrying", "error"}
	// edgeCloseCodes are the codes edge closes a socket with itself; a
	// peer's codes are its own choice (codeLabel bounds them), so only the
	// commonest of them are created ahead: a normal close, going away, and
	// a TCP close without a close frame.
	edgeCloseCodes = []int{closeGoingAway, closeProtocolError, closePolicy, closeTooBig, closeBadGateway, closeIdleTimeout}
	peerCloseCodes = []string{"1000", "1001", "none"}
)

// fromStart creates the counters' known label values at zero.
func (m *metrics) fromStart() {
	for _, r := range refuseReasons {
		m.refused.WithLabelValues(r)
	}
	for _, r := range dialReasons {
		m.dialFailures.WithLabelValues(r)
		m.ejections.WithLabelValues(r)
	}
	m.ejections.WithLabelValues("lost")
	for _, o := range failoverOutcomes {
		m.failovers.WithLabelValues(o)
	}
	m.probes.WithLabelValues("ok")
	m.probes.WithLabelValues("failed")
	for _, o := range renewalOutcomes {
		m.renewals.WithLabelValues(o)
	}
	for _, o := range releaseOutcomes {
		m.releases.WithLabelValues(o)
	}
	for _, o := range resumeOutcomes {
		m.resumptions.WithLabelValues(o)
	}
	for _, c := range []string{"reset", "eof", "stalled", "hung", "left"} {
		m.podsLost.WithLabelValues(c)
	}
	for _, c := range edgeCloseCodes {
		m.closes.WithLabelValues("edge", codeLabel(c))
	}
	for _, side := range []string{"client", "pod"} {
		for _, c := range peerCloseCodes {
			m.closes.WithLabelValues(side, c)
		}
	}
}

// relayInfo exports edge_proxy_relay_info as it is at each scrape, so the
// series exists from the first scrape (before Run has started the loops,
// new sockets take the goroutine relay, and it says so) and follows a
// fallback without anyone setting it.
type relayInfo struct {
	desc   *prometheus.Desc
	relays func() (configured, running Relay)
}

func (r *relayInfo) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r *relayInfo) Collect(ch chan<- prometheus.Metric) {
	if r.relays == nil {
		return
	}
	configured, running := r.relays()
	ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, 1, string(configured), string(running))
}
