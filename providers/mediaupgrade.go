package providers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// maxMediaUpgrade bounds each list a plugin declares of its media upgrade:
// a handful of names is all a provider signs or negotiates with.
const maxMediaUpgrade = 8

// MediaUpgrade is what of a client's media WebSocket upgrade a provider's
// pods may read (plugins.Description.MediaHeaders and MediaSubprotocols):
// everything else a client sends stops at edge.
type MediaUpgrade struct {
	// Headers are canonical header names (http.CanonicalHeaderKey).
	Headers []string
	// Subprotocols are the subprotocol tokens a client may offer a pod.
	Subprotocols []string
}

// reservedMediaHeaders are the upgrade's own headers, the hop-by-hop ones
// and edge's: a pod reads these as edge writes them, never as a client
// sent them, whatever a plugin declares.
var reservedMediaHeaders = map[string]bool{
	"Host": true, "Connection": true, "Upgrade": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authorization": true, "Proxy-Authenticate": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Content-Length": true,
	"Forwarded": true, "X-Real-Ip": true, "Traceparent": true, "Tracestate": true, "Baggage": true,
	"Edge-Media-Params": true, "Edge-Resumed": true,
}

// checkMediaUpgrade checks a plugin's declared media headers and
// subprotocols and returns them as the host keeps them.
func checkMediaUpgrade(headers, protocols []string) (MediaUpgrade, error) {
	var m MediaUpgrade
	if len(headers) > maxMediaUpgrade {
		return m, fmt.Errorf("media headers: %d declared, at most %d", len(headers), maxMediaUpgrade)
	}
	if len(protocols) > maxMediaUpgrade {
		return m, fmt.Errorf("media subprotocols: %d declared, at most %d", len(protocols), maxMediaUpgrade)
	}
	for _, h := range headers {
		c := http.CanonicalHeaderKey(h)
		switch {
		case !isToken(h) || len(h) > 64:
			return m, fmt.Errorf("media header %q: not a header name of at most 64 bytes", h)
		case reservedMediaHeaders[c], strings.HasPrefix(c, "Sec-Websocket-"), strings.HasPrefix(c, "X-Forwarded-"):
			return m, fmt.Errorf("media header %q: edge writes it itself, a client's never reaches a pod", h)
		case slices.Contains(m.Headers, c):
			return m, fmt.Errorf("media header %q declared twice", h)
		}
		m.Headers = append(m.Headers, c)
	}
	for _, p := range protocols {
		switch {
		case !isToken(p) || len(p) > 64:
			return m, fmt.Errorf("media subprotocol %q: not a token of at most 64 bytes", p)
		case slices.Contains(m.Subprotocols, p):
			return m, fmt.Errorf("media subprotocol %q declared twice", p)
		}
		m.Subprotocols = append(m.Subprotocols, p)
	}
	return m, nil
}

// isToken reports whether s is an RFC 9110 token (header names and
// WebSocket subprotocols are both).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// MediaUpgrade is what provider name's pods may read of a client's media
// upgrade, as its plugin last declared it (kept while the plugin
// restarts). The zero value (no header, no subprotocol) for an unknown
// provider, one whose plugin has not started yet, or one that declared
// none. The slices are the caller's own copies.
func (h *Host) MediaUpgrade(name string) MediaUpgrade {
	p, ok := h.procs[name]
	if !ok {
		return MediaUpgrade{}
	}
	if m := p.mediaUpgrade.Load(); m != nil {
		return MediaUpgrade{Headers: slices.Clone(m.Headers), Subprotocols: slices.Clone(m.Subprotocols)}
	}
	return MediaUpgrade{}
}
