//go:build linux

package proxy

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/proxy/internal/iouring"
	"github.com/edge-voice/edge/proxy/internal/relay/loop"
)

func needUring(t *testing.T) {
	t.Helper()
	if err := iouring.Probe(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
}

// With proxy.relay "uring" the uring loops carry the TLS clients too,
// opening and sealing their records; the metric says which relay took
// each socket and whether its client spoke TLS.
func TestUringRelayCarriesTLS(t *testing.T) {
	needUring(t)
	e := newEnv(t, envOpt{relay: relayUring})
	f := e.serveTLS(t)

	_, plainURL := e.allocate("CA-plain", "")
	plain := e.mustDial(plainURL)
	echo(t, plain, "plain")
	e.checkCarried(t, relayUring, 1)

	_, url := e.allocate("CA-tls", "")
	c := f.dial(t, f.wss(e, url), nil, nil)
	echo(t, c, "over tls")
	echo(t, plain, "plain still flows")

	if got := e.relayedSockets("", "tls"); got != 1 {
		t.Errorf("TLS sockets on the loops = %d, want 1", got)
	}
	if got := e.relayedSockets(relayUring, ""); got != 2 {
		t.Errorf("sockets on the uring loops = %d, want 2 (plain and TLS)", got)
	}
	for _, m := range []struct {
		relay, client string
		want          float64
	}{{"uring", "tcp", 1}, {"uring", "tls", 1}, {"epoll", "tls", 0}, {"epoll", "tcp", 0}, {"goroutines", "tls", 0}} {
		if got := value(e.px.metrics.relayed.WithLabelValues(m.relay, m.client)); got != m.want {
			t.Errorf("edge_proxy_relayed_sockets_total{relay=%q,client=%q} = %v, want %v", m.relay, m.client, got, m.want)
		}
	}
}

// Where io_uring is refused (kernel.io_uring_disabled, a seccomp profile,
// a kernel before 6.1), edge says why once and the epoll loops carry
// every socket: no socket falls to the goroutine relay for it.
func TestUringRefusedFallsBackToTheEpollLoops(t *testing.T) {
	refused := loop.NewRing
	loop.NewRing = func() (*iouring.Ring, error) { return nil, unix.EPERM }
	t.Cleanup(func() { loop.NewRing = refused })
	procs := runtime.GOMAXPROCS(0)

	sink := &lockedBuf{}
	log := slog.New(slog.NewJSONHandler(sink, nil))
	e := newEnv(t, envOpt{relay: relayUring, log: log})
	_, url := e.allocate("CA1", "")
	c := e.mustDial(url)
	echo(t, c, "hello")
	e.checkCarried(t, relayEpoll, 1)
	if got := value(e.px.metrics.relayed.WithLabelValues("epoll", "tcp")); got != 1 {
		t.Errorf("sockets counted on the epoll relay = %v, want 1", got)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d, want %d unchanged with no uring loop", got, procs)
	}
	// The fallback shows on /metrics (the EdgeUringRelayUnavailable alert).
	if c, r := e.px.metrics.relayInfo.relays(); c != relayUring || r != relayEpoll {
		t.Errorf(`edge_proxy_relay_info{configured=%q,running=%q}, want configured="uring",running="epoll"`, c, r)
	}
	found := false
	for _, l := range sink.lines(t) {
		if l["msg"] == "uring relay unavailable: media sockets use the epoll relay" {
			found = strings.Contains(l["err"].(string), "operation not permitted")
		}
	}
	if !found {
		t.Errorf("no warning naming the refusal in the log: %v", sink.lines(t))
	}
}

// A uring loop's wait holds its P (a raw system call), so its start adds
// a P per loop and its stop gives them back.
func TestUringLoopsAddTheirPs(t *testing.T) {
	needUring(t)
	procs := runtime.GOMAXPROCS(0)
	t.Run("running", func(t *testing.T) {
		e := newEnv(t, envOpt{relay: relayUring})
		_, url := e.allocate("CA1", "")
		echo(t, e.mustDial(url), "hello")
		e.checkCarried(t, relayUring, 1)
		if c, r := e.px.metrics.relayInfo.relays(); c != relayUring || r != relayUring {
			t.Errorf(`edge_proxy_relay_info{configured=%q,running=%q}, want both "uring"`, c, r)
		}
		if got, want := runtime.GOMAXPROCS(0), procs+loop.Count(procs); got != want {
			t.Errorf("GOMAXPROCS with the uring loops running = %d, want %d", got, want)
		}
	})
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS after the proxy stopped = %d, want %d", got, procs)
	}
}

// proxy.uring_batch holds each batch open for more completions where the
// kernel can (min_wait); messages still go both ways, in order.
func TestUringBatchWindowRelays(t *testing.T) {
	needUring(t)
	e := newEnv(t, envOpt{relay: relayUring, cfg: func(c *Config) { c.UringBatch = 300 * time.Microsecond }})
	_, url := e.allocate("CA1", "")
	c := e.mustDial(url)
	for i := range 50 {
		echo(t, c, strings.Repeat("m", i*40))
	}
	e.checkCarried(t, relayUring, 1)
	r, err := loop.NewRing()
	if err != nil {
		t.Fatal(err)
	}
	minWait := r.MinWait()
	r.Close()
	want := time.Duration(0)
	if minWait {
		want = 300 * time.Microsecond
	}
	for _, got := range e.px.loops.MaxBatches() {
		if got != want {
			t.Errorf("loop's longest batch window %v, want %v (kernel min_wait: %v)", got, want, minWait)
		}
	}
}

// A socket whose client stops reading holds ring buffers in its stuck
// sends; with the ring that small, other sockets find it empty and
// receive into buffers of their own: they keep flowing, and the stalled
// one delivers everything, in order, once its client reads again.
func TestUringEmptyBufferRingFallsBackToOwnBuffers(t *testing.T) {
	needUring(t)
	ringBufs := loop.RingBufs
	loop.RingBufs = 2
	t.Cleanup(func() { loop.RingBufs = ringBufs })
	e := newEnv(t, envOpt{relay: relayUring, cfg: func(c *Config) { c.IdleTimeout = 5 * time.Minute }})
	_, urlA := e.allocate("CA-stalled", "")
	a := e.mustDial(urlA)
	f := floodUntilStalled(t, a)

	_, urlB := e.allocate("CA-flowing", "")
	b := e.mustDial(urlB)
	for i := range 20 {
		echo(t, b, strings.Repeat("b", 100+i*200))
	}
	starved := value(e.px.metrics.uringOwnBufs)
	t.Logf("%v receives found the ring empty", starved)
	if starved == 0 {
		t.Error("no receive found the ring empty: the stalled socket should hold both of its buffers")
	}

	f.readAll(t)
	echo(t, a, "after the flood")
	echo(t, b, "still flowing")
	e.checkCarried(t, relayUring, 2)
}

// Every ring buffer comes back: a socket echoing far more messages than
// a four-buffer ring holds, one at a time, never finds it empty.
func TestUringBuffersComeBack(t *testing.T) {
	needUring(t)
	ringBufs := loop.RingBufs
	loop.RingBufs = 4
	t.Cleanup(func() { loop.RingBufs = ringBufs })
	e := newEnv(t, envOpt{relay: relayUring})
	_, url := e.allocate("CA1", "")
	c := e.mustDial(url)
	for i := range 200 {
		echo(t, c, strings.Repeat("x", 1+i*37%3000))
	}
	e.checkCarried(t, relayUring, 1)
	if n := value(e.px.metrics.uringOwnBufs); n != 0 {
		t.Errorf("%v receives found the ring empty: buffers were not given back", n)
	}
}
