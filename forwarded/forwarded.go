// Package forwarded decides which forwarding headers edge believes: only
// those a trusted proxy (a CIDR of the trusted-proxy list, as nginx's
// set_real_ip_from or Caddy's trusted_proxies) put there. Everything else
// about a request's origin comes from the connection itself.
//
// It serves the webhook URL a provider signed (scheme and host), the client
// address of IP allow-lists, and the X-Forwarded-* headers the media proxy
// sets for pods.
package forwarded

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Trusted is a trusted-proxy list. The zero value (and nil) trusts nobody.
type Trusted struct {
	nets []netip.Prefix
}

// Parse reads CIDRs ("10.0.0.0/8", "fd00::/8") or bare addresses (one
// host). path names the setting in errors.
func Parse(path string, cidrs []string) (*Trusted, error) {
	t := &Trusted{}
	for i, s := range cidrs {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%s[%d]: %q: not a CIDR or an IP address", path, i, s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		t.nets = append(t.nets, p.Masked())
	}
	return t, nil
}

// TrustsAll reports whether the list trusts every IPv4 or every IPv6
// client (0.0.0.0/0 or ::/0): then any client sets its own address.
func (t *Trusted) TrustsAll() bool {
	for _, p := range t.list() {
		if p.Bits() == 0 {
			return true
		}
	}
	return false
}

func (t *Trusted) list() []netip.Prefix {
	if t == nil {
		return nil
	}
	return t.nets
}

func (t *Trusted) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.list() {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peer is the connection's remote address.
func peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		a, _ := netip.ParseAddr(host)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

// fromTrusted reports whether the request came straight from a trusted
// proxy, so that its X-Forwarded-* headers may be read.
func (t *Trusted) fromTrusted(r *http.Request) bool { return t.trusts(peer(r)) }

// chain is the X-Forwarded-For list of r, in order, entries trimmed.
func chain(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

// ClientIP is the address of whoever sent the request: the connection's
// peer, or, walking X-Forwarded-For from the right past trusted proxies,
// the first address no trusted proxy vouches for. An unparsable entry stops
// the walk at the last trusted hop's address.
func (t *Trusted) ClientIP(r *http.Request) netip.Addr {
	client := peer(r)
	if !t.trusts(client) {
		return client
	}
	xs := chain(r)
	for i := len(xs) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(xs[i])
		if err != nil {
			return client
		}
		client = a.Unmap()
		if !t.trusts(client) {
			return client
		}
	}
	return client
}

// Scheme is "https" when the request came over TLS, or a trusted proxy
// says it did (X-Forwarded-Proto); "http" otherwise.
func (t *Trusted) Scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if t.fromTrusted(r) {
		if v := strings.ToLower(first(r.Header.Get("X-Forwarded-Proto"))); v == "https" || v == "http" {
			return v
		}
	}
	return "http"
}

// Host is the host the client asked for: r.Host, or a trusted proxy's
// X-Forwarded-Host.
func (t *Trusted) Host(r *http.Request) string {
	if t.fromTrusted(r) {
		if v := first(r.Header.Get("X-Forwarded-Host")); v != "" && validHost(v) {
			return v
		}
	}
	return r.Host
}

// Headers are the X-Forwarded-* headers edge sends upstream: the chain a
// trusted proxy started (client values otherwise dropped) plus the peer.
func (t *Trusted) Headers(r *http.Request) (xff, proto, host string) {
	p := peer(r).String()
	xff = p
	if t.fromTrusted(r) {
		if xs := chain(r); len(xs) > 0 {
			xff = strings.Join(xs, ", ") + ", " + p
		}
	}
	return xff, t.Scheme(r), t.Host(r)
}

func first(s string) string {
	v, _, _ := strings.Cut(s, ",")
	return strings.TrimSpace(v)
}

// validHost accepts what may stand in a URL's authority: letters, digits,
// '.', '-', ':', '[' and ']' (IPv6), nothing that could end the authority.
func validHost(s string) bool {
	if len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-:[]", c) >= 0) {
			return false
		}
	}
	return s != ""
}
