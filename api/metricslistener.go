package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/edge-voice/edge/internal/confcheck"
)

// MetricsOnly is the handler of listen.metrics: GET /metrics without
// credentials, and nothing else (404). The predecessor's Deployment had
// Prometheus scrape /metrics on its port 9090 with no credentials; edge's
// admin listener wants admin_token from any host but this one, so that
// scrape configuration got 401 there. This listener can be opened to the
// scraper without a token: it changes nothing and serves no route but the
// series.
func (s *Surface) MetricsOnly() http.Handler {
	mux := http.NewServeMux()
	if s.Metrics != nil {
		mux.Handle("GET /metrics", s.Metrics)
	}
	return mux
}

// MetricsExposed reports a listen.metrics that other hosts reach: its
// series (pod, tier and merchant pool names, call counts) are readable by
// any of them.
func (l Listen) MetricsExposed() bool {
	host, _, err := net.SplitHostPort(l.Metrics)
	return l.Metrics != "" && err == nil && !loopback(host)
}

// validateMetrics checks listen.metrics is host:port ("" is off) and
// shares no port with the other listeners.
func (l Listen) validateMetrics() error {
	if l.Metrics == "" {
		return nil
	}
	host, port, err := confcheck.HostPort("listen.metrics", l.Metrics, 0)
	if err != nil || port == 0 {
		return err
	}
	var errs []error
	for _, o := range []struct{ key, addr string }{{"listen.public", l.Public}, {"listen.admin", l.Admin}, {"listen.internal", l.Internal}} {
		if o.addr == "" {
			continue
		}
		oh, op, err := confcheck.HostPort(o.key, o.addr, 0)
		if err == nil && op == port && (oh == host || wildcard(oh) || wildcard(host)) {
			errs = append(errs, confcheck.Invalid("listen.metrics", l.Metrics, fmt.Sprintf("must not share port %d with %s", port, o.key)))
		}
	}
	return errors.Join(errs...)
}
