package proxy

import (
	"crypto/tls"
	"net"

	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// TLSListener serves TLS on inner with cfg, as tls.NewListener does, and
// lets the media proxy take over the records of the sockets it relays on
// its event loops (epoll or uring): they then open and seal the TLS 1.3
// records themselves instead of a goroutine pair around a tls.Conn.
// Connections other than TCP are served as by tls.NewListener.
func TLSListener(inner net.Listener, cfg *tls.Config) net.Listener { return tls13.Listener(inner, cfg) }
