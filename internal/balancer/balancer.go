package balancer

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Backend is one replica behind the balancer.
type Backend struct {
	// Name identifies the backend in Route and Outages.
	Name string
	// Addr is where connections go (host:port).
	Addr string
	// ReadyURL answers 200 while the backend wants traffic.
	ReadyURL string
}

// Options tune the balancer; zero values take the defaults.
type Options struct {
	// Interval between readiness probes of each backend. Default 200ms.
	Interval time.Duration
	// ProbeTimeout bounds one probe; a probe that times out says not
	// ready. Default 1s (a Kubernetes readinessProbe's timeoutSeconds).
	ProbeTimeout time.Duration
	// DialTimeout bounds connecting to a backend. Default 1s.
	DialTimeout time.Duration
}

// Balancer forwards connections from its listener to ready backends.
type Balancer struct {
	ln   net.Listener
	opts Options
	http *http.Client

	mu       sync.Mutex
	backends []*backend
	next     int
	routes   map[string]string // client address -> backend name
	conns    map[net.Conn]struct{}
	none     time.Time // since when no backend is ready (zero: some is)
	outages  []Outage
	changed  chan struct{} // closed and replaced on every readiness change
	refused  atomic.Int64
	wg       sync.WaitGroup
	stopping chan struct{}
}

// Outage is a stretch of time with no ready backend.
type Outage struct{ From, To time.Time }

type backend struct {
	Backend
	ready   bool
	stop    chan struct{}
	stopped bool
}

// Listen opens the balancer's listener on addr ("127.0.0.1:0" for any
// port). Run serves it.
func Listen(addr string, opts Options) (*Balancer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if opts.Interval <= 0 {
		opts.Interval = 200 * time.Millisecond
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = time.Second
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = time.Second
	}
	return &Balancer{
		ln:   ln,
		opts: opts,
		// A fresh connection per probe: a kept-alive one would outlive
		// the backend's listener and say nothing about it.
		http:     &http.Client{Timeout: opts.ProbeTimeout, Transport: &http.Transport{DisableKeepAlives: true}},
		routes:   map[string]string{},
		conns:    map[net.Conn]struct{}{},
		none:     time.Now(),
		changed:  make(chan struct{}),
		stopping: make(chan struct{}),
	}, nil
}

// Addr is the balancer's host:port.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// SetBackends replaces the set of backends. A backend kept by name keeps
// its readiness; a new one starts unready until its first probe answers.
func (b *Balancer) SetBackends(bs ...Backend) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.stopping:
		return // Run has ended: no prober may start
	default:
	}
	old := map[string]*backend{}
	for _, be := range b.backends {
		old[be.Name] = be
	}
	var next []*backend
	for _, nb := range bs {
		if be, ok := old[nb.Name]; ok && be.Backend == nb {
			delete(old, nb.Name)
			next = append(next, be)
			continue
		}
		be := &backend{Backend: nb, stop: make(chan struct{})}
		next = append(next, be)
		b.wg.Add(1)
		go b.probe(be)
	}
	for _, be := range old {
		be.stopped = true
		close(be.stop)
	}
	b.backends = next
	b.readinessChanged()
}

// readinessChanged records the start or end of an outage and wakes
// WaitReady; b.mu is held.
func (b *Balancer) readinessChanged() {
	ready := 0
	for _, be := range b.backends {
		if be.ready {
			ready++
		}
	}
	switch {
	case ready == 0 && b.none.IsZero():
		b.none = time.Now()
	case ready > 0 && !b.none.IsZero():
		b.outages = append(b.outages, Outage{b.none, time.Now()})
		b.none = time.Time{}
	}
	close(b.changed)
	b.changed = make(chan struct{})
}

// probe polls one backend's readiness until it is removed or the
// balancer stops.
func (b *Balancer) probe(be *backend) {
	defer b.wg.Done()
	tick := time.NewTicker(b.opts.Interval)
	defer tick.Stop()
	for {
		ready := b.ready(be.ReadyURL)
		b.mu.Lock()
		if !be.stopped && be.ready != ready {
			be.ready = ready
			b.readinessChanged()
		}
		b.mu.Unlock()
		select {
		case <-tick.C:
		case <-be.stop:
			return
		case <-b.stopping:
			return
		}
	}
}

func (b *Balancer) ready(url string) bool {
	resp, err := b.http.Get(url)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Ready is the names of the backends ready now.
func (b *Balancer) Ready() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, be := range b.backends {
		if be.ready {
			out = append(out, be.Name)
		}
	}
	return out
}

// WaitReady returns once cond holds for the names of the ready backends
// (checked again after every readiness change) or ctx ends.
func (b *Balancer) WaitReady(ctx context.Context, cond func(ready []string) bool) error {
	for {
		b.mu.Lock()
		ch := b.changed
		b.mu.Unlock()
		if cond(b.Ready()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Outages returns every stretch without a ready backend that began at or
// after since, an ongoing one ending now. The time before the first
// backend was ever ready counts as an outage: pass the time the test's
// measurement starts.
func (b *Balancer) Outages(since time.Time) []Outage {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Outage
	for _, o := range b.outages {
		if !o.To.Before(since) {
			out = append(out, Outage{maxTime(o.From, since), o.To})
		}
	}
	if !b.none.IsZero() {
		out = append(out, Outage{maxTime(b.none, since), time.Now()})
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Refused is how many connections were reset for want of a ready backend
// or because the chosen backend refused them.
func (b *Balancer) Refused() int64 { return b.refused.Load() }

// Route names the backend chosen for a connection from clientAddr (the
// client's local host:port), whether or not it took the connection.
func (b *Balancer) Route(clientAddr string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	name, ok := b.routes[clientAddr]
	return name, ok
}

// Run accepts connections until ctx ends, then closes the listener and
// every forwarded connection.
func (b *Balancer) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		close(b.stopping) // under mu: SetBackends starts no prober after it
		for c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.ln.Close()
	})
	defer stop()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				b.wg.Wait()
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			continue
		}
		b.wg.Add(1)
		go b.forward(c)
	}
}

// pick returns the next ready backend in round-robin order.
func (b *Balancer) pick() (*backend, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range b.backends {
		be := b.backends[b.next%len(b.backends)]
		b.next++
		if be.ready {
			return be, true
		}
	}
	return nil, false
}

func (b *Balancer) forward(c net.Conn) {
	defer b.wg.Done()
	be, ok := b.pick()
	if !ok {
		b.refuse(c)
		return
	}
	b.mu.Lock()
	b.routes[c.RemoteAddr().String()] = be.Name
	b.mu.Unlock()
	up, err := net.DialTimeout("tcp", be.Addr, b.opts.DialTimeout)
	if err != nil {
		// Like kube-proxy, no retry on another backend: the client sees
		// what a caller would between a backend's end and the next probe.
		b.refuse(c)
		return
	}
	b.mu.Lock()
	select {
	case <-b.stopping:
		b.mu.Unlock()
		c.Close()
		up.Close()
		return
	default:
	}
	b.conns[c], b.conns[up] = struct{}{}, struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		delete(b.conns, up)
		b.mu.Unlock()
		c.Close()
		up.Close()
	}()
	done := make(chan struct{}, 2)
	go pipe(up, c, done)
	go pipe(c, up, done)
	<-done
	<-done
}

// pipe copies one direction and passes the end of it on (a half close),
// so that each side's close reaches the other as it would through a
// kernel-level balancer.
func pipe(dst, src net.Conn, done chan<- struct{}) {
	_, err := io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok && err == nil {
		tc.CloseWrite()
	} else {
		// A reset or error on one side resets the other.
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		dst.Close()
		src.Close()
	}
	done <- struct{}{}
}

// refuse resets c: the client gets ECONNRESET, not a clean end of stream.
func (b *Balancer) refuse(c net.Conn) {
	b.refused.Add(1)
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
