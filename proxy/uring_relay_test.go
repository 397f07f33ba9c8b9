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
	refused := newUringRing
	newUringRing = func() (*iouring.Ring, error) { return nil, unix.EPERM }
	t.Cleanup(func() { newUringRing = refused })
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
		if got, want := runtime.GOMAXPROCS(0), procs+loopCount(procs); got != want {
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
	r, err := newUringRing()
	if err != nil {
		t.Fatal(err)
	}
	minWait := r.MinWait()
	r.Close()
	want := time.Duration(0)
	if minWait {
		want = 300 * time.Microsecond
	}
	for _, l := range *e.px.loops.uset.Load() {
		if l.maxBatch != want {
			t.Errorf("loop's longest batch window %v, want %v (kernel min_wait: %v)", l.maxBatch, want, minWait)
		}
	}
}

// The window gathers about batchTarget completions at the last tick's
// rate, up to the configured bound, and is none where the bound would not
// gather a quarter of them.
func TestBatchWindowFollowsTheLoad(t *testing.T) {
	const tick = 50 * time.Millisecond
	for _, c := range []struct {
		name     string
		n        int // completions in the tick
		maxBatch time.Duration
		want     time.Duration
	}{
		{"off", 100000, 0, 0},
		{"idle", 0, 300 * time.Microsecond, 0},
		// 10 streams: 2,000 completions a second, 0.6 in 300 us.
		{"light load: no window", 100, 300 * time.Microsecond, 0},
		// 35 streams: 4.2 expected in 300 us, over a quarter of the target.
		{"moderate load: the bound", 700, 300 * time.Microsecond, 300 * time.Microsecond},
		// 200 streams: 40,000 a second, 16 in 400 us.
		{"200 streams", 2000, time.Millisecond, 400 * time.Microsecond},
		{"1000 streams", 10000, time.Millisecond, 80 * time.Microsecond},
		{"5000 streams", 50000, time.Millisecond, 16 * time.Microsecond},
	} {
		if got := batchWindow(c.n, tick, c.maxBatch); got != c.want {
			t.Errorf("%s: batchWindow(%d in %v, bound %v) = %v, want %v", c.name, c.n, tick, c.maxBatch, got, c.want)
		}
	}
}

// A socket whose client stops reading holds ring buffers in its stuck
// sends; with the ring that small, other sockets find it empty and
// receive into buffers of their own: they keep flowing, and the stalled
// one delivers everything, in order, once its client reads again.
func TestUringEmptyBufferRingFallsBackToOwnBuffers(t *testing.T) {
	needUring(t)
	ringBufs := uringBufs
	uringBufs = 2
	t.Cleanup(func() { uringBufs = ringBufs })
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
	ringBufs := uringBufs
	uringBufs = 4
	t.Cleanup(func() { uringBufs = ringBufs })
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
