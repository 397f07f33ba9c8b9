package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/internal/confcheck"
)

// Internal is who may use the cluster-internal listener (listen.internal):
// the predecessor's whole surface on one port, where its voice agents call
// release and drain with no credentials. The public listener
// faces the internet and the admin one wants a bearer token off loopback;
// agents send neither, so this third listener takes them by where they
// come from instead, and by a token only if one is set.
type Internal struct {
	// Allow are the CIDRs a direct peer may connect from; anyone else gets
	// 403 before any route runs. Forwarded headers are never read here: a
	// client cannot claim an address. Default: loopback and the private
	// ranges a cluster's pods live in (RFC 1918, RFC 6598, IPv6 ULA).
	Allow []string `koanf:"allow" reload:"restart"`
	// Token, when set, is a bearer token every non-probe route requires.
	// Predecessor agents send none: set it only once they do.
	Token string `koanf:"token" secret:"true"`
}

// DefaultInternalAllow is the default source allow-list of listen.internal.
var DefaultInternalAllow = []string{
	"127.0.0.0/8", "::1/128",
	"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
	"fc00::/7",
}

// Validate checks the allow-list parses and the token's form.
func (in Internal) Validate() error {
	_, err := ParseAllow(in.Allow)
	if in.Token != "" {
		if e := validateAdminToken(in.Token); e != nil {
			err = errors.Join(err, fmt.Errorf("internal.token: %w", errors.Unwrap(e)))
		}
	}
	return err
}

// ParseAllow parses the internal.allow CIDRs (a bare address is one host).
func ParseAllow(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	var errs []error
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				errs = append(errs, confcheck.Invalid(fmt.Sprintf("internal.allow[%d]", i), s, "must be a CIDR or an address"))
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, errors.Join(errs...)
}

// InternalSurface is the predecessor's surface as it served it on
// smart-router:8080: release, drain, status and pod info for agents and
// operators, the agents' own allocate, /api/v1/health, /api/v1/ready and
// /api/v1/metrics, and, beside them, everything else the public listener
// serves (the provider webhooks), with the same authentication as there.
//
// Bodies are taken whatever their Content-Type, as the predecessor took
// them (its agents post release and drain without one); a browser's
// cross-origin request is refused.
//
// POST /api/v1/allocate takes the voice agents' calls without credentials,
// as the predecessor did (its client posts no token): the caller is
// "internal", for any merchant, and a repeat of its call gets the call's
// media URL. A bearer token of generic_api.tokens still names its caller
// and its merchants; internal.token, when set, is wanted otherwise.
func (s *Surface) InternalSurface(allow []netip.Prefix, token func() string) http.Handler {
	ops := http.NewServeMux()
	ops.Handle("POST /api/v1/release", s.bounded(s.Handlers.release))
	ops.Handle("POST /api/v1/drain", s.bounded(s.Handlers.drain))
	ops.Handle("GET /api/v1/status", s.bounded(s.Handlers.predecessorStatus))
	ops.Handle("GET /api/v1/pod/{pod_name}", s.bounded(s.Handlers.podInfo))
	if s.Metrics != nil {
		ops.Handle("GET /api/v1/metrics", s.Metrics)
		ops.Handle("GET /metrics", s.Metrics)
	}
	th := s.throttle()
	guarded := requireToken(th, "internal", token, sameOrigin(ops))

	mux := http.NewServeMux()
	for _, p := range []string{"POST /api/v1/release", "POST /api/v1/drain", "GET /api/v1/status",
		"GET /api/v1/pod/{pod_name}", "GET /api/v1/metrics", "GET /metrics"} {
		mux.Handle(p, guarded)
	}
	mux.Handle("POST /api/v1/allocate", sameOrigin(s.bounded(s.Handlers.internalAllocate(th, token))))
	mux.HandleFunc("GET /api/v1/health", healthz)
	mux.HandleFunc("GET /api/v1/ready", s.Ready.serve)
	// The rest is the public surface, whose routes authenticate themselves.
	mux.Handle("/", s.Public())
	return fromAllowed(allow, mux)
}

// fromAllowed refuses a peer outside allow, judged by the connection's own
// address.
func fromAllowed(allow []netip.Prefix, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !peerAllowed(allow, r.RemoteAddr) {
			writeError(w, r, nil, fmt.Errorf("%w: %s is not in internal.allow", calls.ErrForbidden, r.RemoteAddr))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func peerAllowed(allow []netip.Prefix, remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// validateInternal checks listen.internal is host:port ("" is off) and
// shares no port with the other two.
func (l Listen) validateInternal() error {
	if l.Internal == "" {
		return nil
	}
	host, port, err := confcheck.HostPort("listen.internal", l.Internal, 0)
	if err != nil || port == 0 {
		return err
	}
	for _, o := range []struct{ key, addr string }{{"listen.public", l.Public}, {"listen.admin", l.Admin}} {
		oh, op, err := confcheck.HostPort(o.key, o.addr, 0)
		if err == nil && op == port && (oh == host || wildcard(oh) || wildcard(host)) {
			return confcheck.Invalid("listen.internal", l.Internal, fmt.Sprintf("must not share port %d with %s", port, o.key))
		}
	}
	return nil
}
