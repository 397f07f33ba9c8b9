package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// hopHeaders are not forwarded (RFC 9110 section 7.6.1); the upgrade pair,
// the key and the version are written again by the pod's handshake. The
// client's own forwarding headers are dropped too: edge sets X-Forwarded-*
// itself (see Deps.Forwarded), so a pod never reads an origin a client made
// up.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"X-Forwarded-For": true, "X-Forwarded-Proto": true, "X-Forwarded-Host": true,
	"X-Forwarded-Port": true, "X-Forwarded-Prefix": true, "X-Forwarded-Server": true,
	"X-Real-Ip": true, "Forwarded": true, "X-Client-Ip": true, "True-Client-Ip": true,
	"Host": true, "Content-Length": true, "Sec-Websocket-Key": true, "Sec-Websocket-Version": true,
}

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
}

// podHeader is what the pod's upgrade carries of the client's request r:
// its headers less the hop-by-hop ones (those the client names in
// Connection too, RFC 9110 7.6.1), its trace headers and its forwarding
// ones, then edge's X-Forwarded-* (fwd) and the socket's traceparent.
func podHeader(ctx context.Context, r *http.Request, fwd ForwardedFunc) http.Header {
	named := map[string]bool{}
	for _, v := range r.Header.Values("Connection") {
		for _, n := range strings.Split(v, ",") {
			named[http.CanonicalHeaderKey(strings.TrimSpace(n))] = true
		}
	}
	h := make(http.Header, len(r.Header)+4)
	for name, vs := range r.Header {
		if hopHeaders[name] || named[name] || traceHeaders[name] {
			continue
		}
		h[name] = vs
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
