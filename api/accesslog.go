package api

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
)

// AccessLog says which requests a listener logs: one "http request" line
// each, at info, in edge's log stream (http.access_log,
// http.access_log_sample).
type AccessLog struct {
	// Enabled turns the lines on.
	Enabled bool
	// Sample is the share of answered requests below 400 that get a line,
	// from 0 (failures only) to 1 (every request). A 4xx or 5xx always
	// gets its line: those are the ones an operator looks for.
	Sample float64
	// ProbeSample is the same share for the health probes (/healthz,
	// /readyz), which a balancer and kubelet send every few seconds to
	// every replica: at 1 they are most of the log and say nothing.
	ProbeSample float64
}

// accessLog writes a listener's access lines. Media sockets get theirs
// from the proxy ("media socket closed", with the call's duration).
type accessLog struct {
	listener string
	log      *slog.Logger
	cfg      func() AccessLog
	clientIP func(*http.Request) netip.Addr
}

func (a *accessLog) wants(route string, status int) bool {
	cfg := AccessLog{Enabled: true, Sample: 1, ProbeSample: 1}
	if a.cfg != nil {
		cfg = a.cfg()
	}
	sample := cfg.Sample
	if route == "/healthz" || route == "/readyz" {
		sample = cfg.ProbeSample
	}
	switch {
	case !cfg.Enabled:
		return false
	case status >= 400 || sample >= 1:
		return true
	case sample <= 0:
		return false
	}
	return rand.Float64() < sample
}

// line logs r's line: route is its pattern's (routeOf), note what the call
// lifecycle learned of it.
func (a *accessLog) line(ctx context.Context, r *http.Request, route string, sw *statusWriter, took time.Duration, note *calls.RequestNote) {
	status := sw.status()
	if !a.wants(route, status) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String("listener", a.listener),
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		slog.Int64("bytes", sw.n),
		slog.String("client", a.client(r)),
	)
	if ua := r.UserAgent(); ua != "" {
		if len(ua) > 256 {
			ua = ua[:256]
		}
		attrs = append(attrs, slog.String("user_agent", ua))
	}
	id := note.CallID()
	if id == "" && allocator.ValidateID("call_sid", r.PathValue("call_sid")) == nil {
		id = r.PathValue("call_sid") // the timeline's route names its call
	}
	if id != "" {
		attrs = append(attrs, slog.String("call_sid", id))
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "http request", attrs...)
}

func (a *accessLog) client(r *http.Request) string {
	if a.clientIP != nil {
		if ip := a.clientIP(r); ip.IsValid() {
			return ip.String()
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
