package proxy

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/internal/testpki"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// The two ways to serve TLS on edge's public listener that the pre-auth
// measurements compare: crypto/tls alone, and edge's, which watches the
// records for the hand-off to the loops.
var preAuthListeners = []struct {
	name string
	wrap func(net.Listener, *tls.Config) net.Listener
}{
	{"tls.NewListener", tls.NewListener},
	{"TLSListener", TLSListener},
}

// preAuthServer is an http.Server behind wrap on loopback, as edge's public
// listener; conns returns the server's side of the connections accepted.
type preAuthServer struct {
	addr  string
	mu    sync.Mutex
	conns []*net.TCPConn
}

func startPreAuthServer(tb testing.TB, wrap func(net.Listener, *tls.Config) net.Listener) *preAuthServer {
	tb.Helper()
	ca := testpki.NewCA(tb)
	pair := ca.Valid(tb, "127.0.0.1")
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &preAuthServer{addr: ln.Addr().String()}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{cert}}
	// Connections that never complete a handshake are what is measured:
	// their errors are not news.
	srv := &http.Server{Handler: http.NotFoundHandler(), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(wrap(recordingListener{ln, s}, cfg))
	tb.Cleanup(func() { srv.Close() })
	return s
}

type recordingListener struct {
	net.Listener
	s *preAuthServer
}

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		l.s.mu.Lock()
		l.s.conns = append(l.s.conns, tc)
		l.s.mu.Unlock()
	}
	return c, err
}

// waitConsumed returns once the server has accepted n connections and read
// every byte the clients sent: nothing waits in the server's receive
// queues or the clients' send queues. The kernel's queues have no event
// to wait on: this polls.
func (s *preAuthServer) waitConsumed(tb testing.TB, n int, clients []net.Conn) {
	tb.Helper()
	queued := func(c syscall.Conn, req uint) int {
		rc, err := c.SyscallConn()
		if err != nil {
			return 0
		}
		q := 0
		rc.Control(func(fd uintptr) { q, _ = unix.IoctlGetInt(int(fd), req) })
		return q
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Microsecond) {
		if time.Now().After(deadline) {
			tb.Fatal("the server did not read what the clients sent")
		}
		s.mu.Lock()
		conns := append([]*net.TCPConn(nil), s.conns...)
		s.mu.Unlock()
		left := len(conns) < n
		for _, c := range conns {
			left = left || queued(c, unix.SIOCINQ) > 0
		}
		for _, c := range clients {
			left = left || queued(c.(*net.TCPConn), unix.SIOCOUTQ) > 0
		}
		if !left {
			return
		}
	}
}

// partialHello is the start of a handshake record announcing 16 KiB (the
// most a TLS 1.2 ClientHello record may carry), and all of it but its
// last 384 bytes: what a client sends to hold a connection's buffers
// without ever completing a handshake.
func partialHello() []byte {
	const n = 1 << 14
	return append([]byte{tls13.RecordTypeHandshake, 3, 1, n >> 8, n & 0xff}, make([]byte, n-384)...)
}

// liveHeap is the heap in use after a collection. (Goroutine stacks are
// left out: both listeners run the same goroutines, and a stack freed by
// an earlier measurement's connections is reused by the next one's.)
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// heldPerConn opens n connections to a server behind wrap, each holding a
// partial ClientHello, and returns what the process holds per connection
// once the server has read them all.
func heldPerConn(tb testing.TB, wrap func(net.Listener, *tls.Config) net.Listener, n int) float64 {
	tb.Helper()
	s := startPreAuthServer(tb, wrap)
	before := liveHeap()
	hello := partialHello()
	clients := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		if _, err := c.Write(hello); err != nil {
			tb.Fatal(err)
		}
		clients = append(clients, c)
	}
	s.waitConsumed(tb, n, clients)
	after := liveHeap()
	runtime.KeepAlive(clients)
	return (float64(after) - float64(before)) / float64(n)
}

// trickled sends a partial ClientHello to a server behind wrap size bytes
// at a time, each read by the server before the next is sent, and
// returns the bytes the process allocated and the CPU time it used per
// byte sent.
func trickled(tb testing.TB, wrap func(net.Listener, *tls.Config) net.Listener, size int) (allocPerByte, cpuPerByte float64) {
	tb.Helper()
	s := startPreAuthServer(tb, wrap)
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	hello := partialHello()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc0, cpu0 := ms.TotalAlloc, processCPU()
	for len(hello) > 0 {
		n := min(size, len(hello))
		if _, err := c.Write(hello[:n]); err != nil {
			tb.Fatal(err)
		}
		hello = hello[n:]
		s.waitConsumed(tb, 1, []net.Conn{c})
	}
	cpu := processCPU() - cpu0
	runtime.ReadMemStats(&ms)
	sent := float64(len(partialHello()))
	return float64(ms.TotalAlloc-alloc0) / sent, float64(cpu.Nanoseconds()) / sent
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Before any authentication, a TLS connection to edge's listener costs no
// more memory than one to crypto/tls's own: the record watch (for the
// hand-off to the loops) keeps no copy of a partial record, and a record
// that trickles in is not copied again on every read. Measured side by
// side with tls.NewListener in the same process (BenchmarkTLSPreAuth
// gives the figures).
func TestTLSListenerPreAuthCost(t *testing.T) {
	const conns = 200
	held := map[string]float64{}
	alloc := map[string]float64{}
	for _, l := range preAuthListeners {
		held[l.name] = heldPerConn(t, l.wrap, conns)
		alloc[l.name], _ = trickled(t, l.wrap, 20)
	}
	t.Logf("held per connection: %v; allocated per trickled byte: %v", held, alloc)
	// The listener's own per-connection state (128 bytes) is the only
	// difference allowed, with room for the measurement's noise.
	if d := held["TLSListener"] - held["tls.NewListener"]; d > 512 {
		t.Errorf("a connection holding a partial ClientHello costs %.0f bytes more behind TLSListener than behind tls.NewListener (%.0f)", d, held["tls.NewListener"])
	}
	if a, b := alloc["TLSListener"], alloc["tls.NewListener"]; a > 2*b+1 {
		t.Errorf("a trickled record allocates %.1f bytes per byte behind TLSListener, %.1f behind tls.NewListener", a, b)
	}
}

// BenchmarkTLSPreAuth is the cost of unauthenticated TLS connections to
// edge's listener and to crypto/tls's: what a connection holding a partial
// ClientHello keeps (held-B/conn) and what a record trickled in 20-byte
// reads costs (alloc-B/byte, cpu-ns/byte, process-wide: the client's
// writes and the test's polling are in both rows).
//
//	go test -run '^$' -bench TLSPreAuth -benchtime 1x -count 3 ./proxy/
func BenchmarkTLSPreAuth(b *testing.B) {
	for _, l := range preAuthListeners {
		b.Run(l.name, func(b *testing.B) {
			var held, alloc, cpu float64
			for range b.N {
				held += heldPerConn(b, l.wrap, 1000)
				a, c := trickled(b, l.wrap, 20)
				alloc, cpu = alloc+a, cpu+c
			}
			n := float64(b.N)
			b.ReportMetric(held/n, "held-B/conn")
			b.ReportMetric(alloc/n, "alloc-B/byte")
			b.ReportMetric(cpu/n, "cpu-ns/byte")
		})
	}
}
