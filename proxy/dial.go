package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
	"github.com/edge-voice/edge/proxy/mediaurl"
)

// upstream is a pod connection after a validated 101.
type upstream struct {
	conn net.Conn
	// resp is the pod's 101, relayed to the client as it is.
	resp *http.Response
	// early holds bytes the pod sent after its 101 that the response reader
	// buffered; they go to the client first.
	early []byte
	// addr is the address dialled: the pod's instance, should the name
	// come to stand for another one (a replacement).
	addr string
	// notice, for a pod a call moved to, are the frames the client gets
	// before anything of it (AfterMove).
	notice []byte
}

// ClientUpgrade is what of a client's media upgrade a provider's pods may
// read (plugins.Description.MediaHeaders and MediaSubprotocols).
type ClientUpgrade struct {
	// Headers are header names a pod gets as the client sent them.
	Headers []string
	// Subprotocols are the subprotocols a pod is offered, of those the
	// client offers.
	Subprotocols []string
}

// podHeader is what the pod's upgrade carries of the client's request r:
// only what edge decided. Edge's own headers (X-Forwarded-* from fwd,
// the socket's traceparent, and Edge-Media-Params, which serve set from
// the token), the client headers the call's provider declared (rules)
// and, of the client's subprotocols, those declared. Nothing else a client
// sends reaches a pod: no extension (a compression negotiated through
// edge would carry messages past proxy.max_message_bytes, and a socket
// whose frames a new pod cannot follow could never move), no cookie,
// Authorization or Origin, so that whoever holds a media URL cannot make
// a healthy pod refuse its call, and the pod is blamed only for its own
// answers.
func podHeader(ctx context.Context, r *http.Request, fwd ForwardedFunc, rules ClientUpgrade) http.Header {
	h := make(http.Header, len(rules.Headers)+6)
	for _, name := range rules.Headers {
		if vs := r.Header.Values(name); len(vs) > 0 {
			h[http.CanonicalHeaderKey(name)] = vs
		}
	}
	if ps := offered(r.Header, rules.Subprotocols); ps != "" {
		h["Sec-Websocket-Protocol"] = []string{ps}
	}
	if v := r.Header.Get(mediaurl.ParamsHeader); v != "" {
		h[mediaurl.ParamsHeader] = []string{v}
	}
	if fwd == nil {
		fwd = direct
	}
	xff, proto, host := fwd(r)
	h["X-Forwarded-For"], h["X-Forwarded-Proto"], h["X-Forwarded-Host"] = []string{xff}, []string{proto}, []string{host}
	if tp := traceParent(ctx); tp != "" {
		h["Traceparent"] = []string{tp}
	}
	return h
}

// offered is the client's Sec-WebSocket-Protocol list less what allowed
// does not name, in the client's order ("" for none).
func offered(h http.Header, allowed []string) string {
	if len(allowed) == 0 {
		return ""
	}
	var out []string
	for _, v := range h.Values("Sec-Websocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); slices.Contains(allowed, p) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return strings.Join(out, ", ")
}

// dialUpstream opens the WebSocket to the pod at addr (from the pod source
// only) for uri with key (the client's, so that the client's own check of
// Sec-WebSocket-Accept holds end to end) and h, and validates the pod's
// 101. ctx bounds the dial and the handshake. Errors mean the client gets
// 502.
func dialUpstream(ctx context.Context, addr, uri, key string, h http.Header) (*upstream, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial pod %s: %w", addr, err)
	}
	if dl, has := ctx.Deadline(); has {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(aLongTimeAgo) })
	resp, early, err := wsproto.ClientHandshake(conn, addr, uri, key, h)
	stop()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("handshake with pod %s: %w", addr, err)
	}
	conn.SetDeadline(noDeadline)
	return &upstream{conn: conn, resp: resp, early: early}, nil
}

// ForwardedFunc returns the X-Forwarded-For, -Proto and -Host values the
// pod gets for r (forwarded.Trusted.Headers: a chain only trusted proxies
// started, plus the client's address).
type ForwardedFunc func(r *http.Request) (xff, proto, host string)

// direct trusts no forwarding header: the peer, TLS or not, and the Host.
func direct(r *http.Request) (xff, proto, host string) {
	xff, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		xff = r.RemoteAddr
	}
	proto = "http"
	if r.TLS != nil {
		proto = "https"
	}
	return xff, proto, r.Host
}
