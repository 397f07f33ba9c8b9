package api

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ListenerConfig bounds what one client can hold on a listener. Request
// bodies and answers are bounded per request (see Surface.bounded); upgraded
// media sockets leave the listener's count and are governed by the proxy.
type ListenerConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for this
	// long.
	IdleTimeout time.Duration
	// MaxConns bounds the connections the listener holds at once. At the
	// bound, a new connection takes the place of an idle one, else of the
	// oldest one still sending its request; 0: no bound.
	MaxConns int
	// Grace is how long a stopping listener waits for requests in flight.
	Grace func() time.Duration
	// TLS, when set, makes the listener speak only TLS with it (see
	// package tlsconf). The handshake is bounded by ReadHeaderTimeout, and
	// a plain-HTTP request gets net/http's 400 "Client sent an HTTP
	// request to an HTTPS server".
	TLS *tls.Config
	// TLSListener, when set, serves TLS on the bound listener in place of
	// tls.NewListener: the public listener's is the media proxy's
	// (proxy.TLSListener), which can take a media socket's TLS records
	// over for its epoll relay. It must return *tls.Conn connections.
	TLSListener func(inner net.Listener, cfg *tls.Config) net.Listener
	// AccessLog returns which requests get an access log line (read per
	// request, so a reload applies at once); nil: every request.
	AccessLog func() AccessLog
	// ClientIP is a request's client address as the trusted proxies name
	// it (forwarded.Trusted.ClientIP), for the access log; nil: the peer's.
	ClientIP func(*http.Request) netip.Addr
}

// Listener is one HTTP listener as a component: Run serves until ctx ends,
// then stops accepting and waits for requests in flight (up to Grace).
// Hijacked connections (media sockets) are not its business: the media
// proxy tracks and drains its own.
type Listener struct {
	name  string
	ln    net.Listener
	srv   *http.Server
	grace func() time.Duration
	log   *slog.Logger
	conns *connTable
	tls   bool
}

// NewListener binds addr now, so that a port in use fails the start.
func NewListener(name, addr string, h http.Handler, cfg ListenerConfig, log *slog.Logger, reg prometheus.Registerer) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		// Under the connection table, so that the table, the server's
		// ConnState and a hijacking handler all see the same *tls.Conn
		// (net/http answers plain HTTP only on a *tls.Conn it can see).
		if cfg.TLSListener != nil {
			ln = cfg.TLSListener(ln, cfg.TLS)
		} else {
			ln = tls.NewListener(ln, cfg.TLS)
		}
	}
	m := listenerMetrics(reg, name)
	ct := newConnTable(name, cfg.MaxConns, log, m)
	h = newRequestMetrics(reg, name).instrument(h, log, &accessLog{listener: name, log: log, cfg: cfg.AccessLog, clientIP: cfg.ClientIP})
	if cfg.Grace == nil {
		cfg.Grace = func() time.Duration { return 30 * time.Second }
	}
	return &Listener{
		name: name, ln: &limitedListener{Listener: ln, table: ct}, grace: cfg.Grace, log: log, conns: ct, tls: cfg.TLS != nil,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: cfg.ReadHeaderTimeout,
			IdleTimeout:       cfg.IdleTimeout,
			MaxHeaderBytes:    32 << 10,
			ConnState:         ct.track,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
	}, nil
}

// Addr is the bound address (useful when the port was 0).
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// URL is scheme://host:port of the bound address, http or https, with an
// unspecified host shown as 127.0.0.1: for a user on this host to paste.
func (l *Listener) URL() string {
	scheme := "http"
	if l.tls {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(l.Addr())
	if err != nil {
		return scheme + "://" + l.Addr()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// Close releases the bound socket of a listener that never ran.
func (l *Listener) Close() error { return l.ln.Close() }

func (l *Listener) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- l.srv.Serve(l.ln) }()
	l.log.Info("listening", "listener", l.name, "addr", l.Addr(), "tls", l.tls)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), l.grace())
	defer cancel()
	if err := l.srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	l.srv.Close()
	<-errc
	return nil
}

// limitedListener makes room in the table before handing a connection to
// the server, and reports accept errors (e.g. out of file descriptors) at
// WARN: net/http retries them silently.
type limitedListener struct {
	net.Listener
	table *connTable
}

func (l *limitedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && !errors.Is(err, net.ErrClosed) {
			l.table.acceptFailed(err)
		}
		return nil, err
	}
	l.table.admit(c)
	return c, nil
}

// connTable counts a listener's connections by state (http.ConnState) and
// sheds the least useful one at the bound, in O(1): two lists, every
// connection by arrival and the idle ones by when they went idle.
type connTable struct {
	name string
	max  int
	log  *slog.Logger
	m    *listenerMetric

	mu    sync.Mutex
	conns map[net.Conn]*connEntry
	all   list.List // of net.Conn, oldest first
	idle  list.List // of net.Conn, longest idle first
	// lastWarn rate-limits the WARNs: one per interval, with counts.
	lastWarn          time.Time
	shedSince, errors int
}

type connEntry struct {
	all, idle *list.Element
}

func newConnTable(name string, max int, log *slog.Logger, m *listenerMetric) *connTable {
	return &connTable{name: name, max: max, log: log, m: m, conns: map[net.Conn]*connEntry{}}
}

// admit records c, first shedding a connection if the table is full: an
// idle keep-alive one if there is one, else the oldest, which is still
// sending its request (a slow client; its deadlines would end it later).
func (t *connTable) admit(c net.Conn) {
	t.mu.Lock()
	var victim net.Conn
	if t.max > 0 && len(t.conns) >= t.max {
		reason := "idle"
		front := t.idle.Front()
		if front == nil {
			reason, front = "slow", t.all.Front()
		}
		if front != nil {
			victim = front.Value.(net.Conn)
			t.removeLocked(victim)
			t.m.shed.WithLabelValues(reason).Inc()
			t.shedSince++
			t.warnLocked("connection limit reached: shedding connections (idle first, then the oldest)", "max_connections", t.max)
		}
	}
	t.conns[c] = &connEntry{all: t.all.PushBack(c)}
	t.m.open.Set(float64(len(t.conns)))
	t.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
}

func (t *connTable) removeLocked(c net.Conn) {
	e, ok := t.conns[c]
	if !ok {
		return
	}
	t.all.Remove(e.all)
	if e.idle != nil {
		t.idle.Remove(e.idle)
	}
	delete(t.conns, c)
}

// track follows the server's view of each connection; a hijacked one (a
// media socket) leaves the table.
func (t *connTable) track(c net.Conn, s http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch s {
	case http.StateClosed, http.StateHijacked:
		t.removeLocked(c)
	case http.StateIdle:
		if e, ok := t.conns[c]; ok && e.idle == nil {
			e.idle = t.idle.PushBack(c)
		}
	default:
		if e, ok := t.conns[c]; ok && e.idle != nil {
			t.idle.Remove(e.idle)
			e.idle = nil
		}
	}
	t.m.open.Set(float64(len(t.conns)))
}

func (t *connTable) acceptFailed(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m.acceptErrors.Inc()
	t.errors++
	t.warnLocked("accepting connections fails", "err", err)
}

// warnLocked logs at most once every 10 s per listener, with the counts
// since the last line.
func (t *connTable) warnLocked(msg string, attrs ...any) {
	now := time.Now()
	if now.Sub(t.lastWarn) < 10*time.Second {
		return
	}
	t.log.Warn(msg, append(attrs, "listener", t.name, "open", len(t.conns), "shed", t.shedSince, "accept_errors", t.errors)...)
	t.lastWarn, t.shedSince, t.errors = now, 0, 0
}
