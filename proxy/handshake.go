package proxy

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// websocketGUID is RFC 6455's fixed GUID for Sec-WebSocket-Accept.
const websocketGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// hopHeaders are not forwarded (RFC 9110 section 7.6.1); the upgrade pair is
// written again by dialUpstream. The client's own forwarding headers are
// dropped too: edge sets X-Forwarded-* itself (see Deps.Forwarded), so a
// pod never reads an origin a client made up.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"X-Forwarded-For": true, "X-Forwarded-Proto": true, "X-Forwarded-Host": true,
	"X-Forwarded-Port": true, "X-Forwarded-Prefix": true, "X-Forwarded-Server": true,
	"X-Real-Ip": true, "Forwarded": true, "X-Client-Ip": true, "True-Client-Ip": true,
}

// errNotUpgrade is a request that is not a WebSocket opening handshake.
var errNotUpgrade = errors.New("not a websocket upgrade")

// Ways a pod refuses the upgrade (dialReason tells them apart).
var (
	errUpgradeStatus = errors.New("pod answered the upgrade with a status other than 101")
	errBadUpgrade    = errors.New("pod's 101 is not a valid WebSocket handshake")
)

// checkUpgrade validates the client's opening handshake (RFC 6455 4.2.1).
func checkUpgrade(r *http.Request) error {
	switch {
	case r.Method != http.MethodGet:
		return fmt.Errorf("%w: method %s", errNotUpgrade, r.Method)
	case !headerHasToken(r.Header, "Connection", "upgrade"):
		return fmt.Errorf("%w: no Connection: upgrade", errNotUpgrade)
	case !headerHasToken(r.Header, "Upgrade", "websocket"):
		return fmt.Errorf("%w: no Upgrade: websocket", errNotUpgrade)
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return fmt.Errorf("%w: Sec-WebSocket-Version must be 13", errNotUpgrade)
	case len(r.Header.Get("Sec-WebSocket-Key")) != 24:
		return fmt.Errorf("%w: bad Sec-WebSocket-Key", errNotUpgrade)
	}
	return nil
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func acceptKey(key string) string {
	sum := sha1.Sum([]byte(key + websocketGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// upstream is a pod connection after a validated 101.
type upstream struct {
	conn net.Conn
	// resp is the pod's 101, relayed to the client as it is.
	resp *http.Response
	// early holds bytes the pod sent after its 101 that the response reader
	// buffered; they go to the client first.
	early []byte
}

// dialUpstream opens the WebSocket to the pod at addr (from the pod source
// only) with the client's key, so the client's own check of
// Sec-WebSocket-Accept holds end to end, and validates the pod's 101. Errors
// mean the client gets 502.
func dialUpstream(ctx context.Context, addr, requestURI string, r *http.Request, fwd ForwardedFunc) (*upstream, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial pod %s: %w", addr, err)
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	// The dial context bounds the handshake too.
	if dl, has := ctx.Deadline(); has {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(aLongTimeAgo) })
	defer stop()

	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n", requestURI, addr)
	// Headers the client names in Connection are hop-by-hop too (RFC 9110
	// 7.6.1), and a GET's Content-Length means nothing to the pod.
	named := map[string]bool{}
	for _, v := range r.Header.Values("Connection") {
		for _, n := range strings.Split(v, ",") {
			named[http.CanonicalHeaderKey(strings.TrimSpace(n))] = true
		}
	}
	for name, vs := range r.Header {
		if hopHeaders[name] || named[name] || traceHeaders[name] || name == "Host" || name == "Content-Length" {
			continue
		}
		for _, v := range vs {
			b.WriteString(name + ": " + headerValue(v) + "\r\n")
		}
	}
	if fwd == nil {
		fwd = direct
	}
	xff, proto, host := fwd(r)
	b.WriteString("X-Forwarded-For: " + headerValue(xff) + "\r\nX-Forwarded-Proto: " + headerValue(proto) +
		"\r\nX-Forwarded-Host: " + headerValue(host) + "\r\n")
	b.WriteString(traceParentHeader(ctx))
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, fmt.Errorf("handshake with pod %s: %w", addr, err)
	}
	br := bufio.NewReaderSize(conn, 1024)
	resp, err := http.ReadResponse(br, r)
	if err != nil {
		return nil, fmt.Errorf("handshake with pod %s: %w", addr, err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode != http.StatusSwitchingProtocols:
		return nil, fmt.Errorf("handshake with pod %s: %w: %s", addr, errUpgradeStatus, resp.Status)
	case !headerHasToken(resp.Header, "Upgrade", "websocket") || !headerHasToken(resp.Header, "Connection", "upgrade"):
		return nil, fmt.Errorf("handshake with pod %s: %w: no upgrade headers", addr, errBadUpgrade)
	case resp.Header.Get("Sec-WebSocket-Accept") != acceptKey(r.Header.Get("Sec-WebSocket-Key")):
		return nil, fmt.Errorf("handshake with pod %s: %w: wrong Sec-WebSocket-Accept", addr, errBadUpgrade)
	}
	up := &upstream{conn: conn, resp: resp}
	if n := br.Buffered(); n > 0 {
		up.early, _ = br.Peek(n)
		up.early = append([]byte(nil), up.early...)
	}
	conn.SetDeadline(noDeadline)
	ok = true
	return up, nil
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

// headerValue drops CR and LF, which net/http already refuses in incoming
// headers; this keeps a header from ever splitting the request edge writes.
func headerValue(v string) string {
	if !strings.ContainsAny(v, "\r\n") {
		return v
	}
	return strings.NewReplacer("\r", "", "\n", "").Replace(v)
}

// writeSwitching writes the pod's 101 to the hijacked client: status line
// and the pod's headers (Sec-WebSocket-Accept, -Protocol, -Extensions...).
func writeSwitching(w *bufio.Writer, resp *http.Response) error {
	w.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	for name, vs := range resp.Header {
		for _, v := range vs {
			w.WriteString(name + ": " + headerValue(v) + "\r\n")
		}
	}
	w.WriteString("\r\n")
	return w.Flush()
}
