//go:build linux

package loop

import (
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// The epoll relay (proxy.relay: epoll). After admission and the pod's 101,
// both TCP connections leave Go's netpoller and join one of a few event
// loops (Count), each an epoll set and one goroutine. A goroutine pair
// per socket cost a netpoller wake-up, a goroutine switch and the syscall
// bookkeeping per message (perf, docs/bench-media.md); a loop instead
// handles every ready socket of one epoll_wait in a row, and its reads and
// writes are raw non-blocking syscalls. An idle loop parks in Go's
// netpoller on its epoll fd: a thread blocked in epoll_wait as an ordinary
// syscall measured far worse (14.5 us per message at 200 streams, the
// runtime retaking and handing back the P). Bytes are read into the loop's
// one buffer, so an idle or a busy stream holds no buffer; only a write the
// peer cannot take keeps its rest, at most one read (readSize), and its
// source is not read until that rest is out: the backpressure reaches the
// sender through TCP.

// readSize is the loops' read buffer, and so the most a stalled direction
// keeps (plus a close frame).
const readSize = 32 << 10

// Count is how many loops of each kind serve the sockets: one per four Ps, rounded
// up. Fewer loops means more ready sockets per wake-up of a loop, and the
// wake-ups (thread switches) were most of the CPU per message in the
// profiles; on the 2-core benchmark machine one loop cost 7.1 us per
// message against 8.3 for two at 200 streams, and 5.6 against 6.0 at 500
// (two loops had a better p50 at 200 streams: docs/bench-media.md). At 5 to 6 us of CPU per message
// a loop has room for well over 100,000 messages a second.
func Count(procs int) int { return max(1, (procs+3)/4) }

// Loops is a set of event loops: epoll, and io_uring beside them when
// asked for. The zero value has none running; Start starts them.
type Loops struct {
	o    Options
	set  atomic.Pointer[[]*eloop]
	next atomic.Uint32
	// uset, with proxy.relay "uring", carries the plain TCP sockets
	// (uloop_linux.go); uprocs is what its start added to GOMAXPROCS.
	uset   atomic.Pointer[[]*uloop]
	uprocs int
}

// Start starts the loops with o; it fails when epoll cannot be used.
// Where io_uring is asked for and refused, the epoll loops carry every
// socket.
func (ls *Loops) Start(o Options) error {
	ls.o = o
	if o.Uring {
		// The epoll loops start too, idle beside working uring loops (a
		// goroutine each, parked): they carry every socket where io_uring
		// is refused.
		if err := ls.startUring(&ls.o); err != nil {
			o.Log.Warn("uring relay unavailable: media sockets use the epoll relay", "err", err)
		}
	}
	n := Count(runtime.GOMAXPROCS(0))
	set := make([]*eloop, 0, n)
	for range n {
		l, err := newLoop(&ls.o)
		if err != nil {
			for _, l := range set {
				l.quit()
			}
			return err
		}
		set = append(set, l)
		go l.run()
	}
	ls.set.Store(&set)
	return nil
}

// Stop ends the loops; the host calls it once every socket has ended.
func (ls *Loops) Stop() {
	ls.stopUring()
	set := ls.set.Swap(nil)
	if set == nil {
		return
	}
	for _, l := range *set {
		l.quit()
	}
}

// Add hands s to a loop, round robin: a uring loop when they run, else an
// epoll loop. It reports false, leaving the connections untouched, when
// the loops cannot carry them (none started, or a connection that is not
// TCP): the caller then uses the goroutine relay. t, when not nil, is the
// client's TLS record layer taken from crypto/tls (package tls13), and its
// TCP connection the client's. podEarly are the pod's bytes read behind
// its 101, early the client's behind its handshake.
func (ls *Loops) Add(s *relay.Socket, podEarly, early []byte, t *tls13.Takeover) bool {
	set := ls.set.Load()
	if set == nil {
		return false
	}
	cc, ok1 := s.Client.(*net.TCPConn)
	if t != nil {
		cc, ok1 = t.Conn(), true
	}
	pc, ok2 := s.PodConn().(*net.TCPConn)
	if !ok1 || !ok2 {
		return false
	}
	if uset := ls.uset.Load(); uset != nil {
		return ls.addUring(*uset, s, cc, pc, podEarly, early, t)
	}
	l := (*set)[int(ls.next.Add(1))%len(*set)]
	cfd, err := detach(cc)
	if err != nil {
		return false
	}
	pfd, err := detach(pc)
	if err != nil {
		// The client conn is already gone from the netpoller: end the
		// socket through a loop rather than half-relay it. The pod conn is
		// still a Go conn (detach leaves it usable on failure): close it.
		pc.Close()
		pfd = -1
	}
	e := &esock{s: s, fds: [2]int{cfd, pfd}}
	if t != nil {
		e.tls = t.Records()
	}
	e.dirs[0] = edir{src: 0, pend: early}
	e.dirs[1] = edir{src: 1, pend: podEarly}
	s.Client = nil
	s.SetPod(nil)
	// Counted before the loop can relay a byte or end the socket, so that
	// whoever sees the socket's traffic or its end sees it counted.
	l.o.Carried(false, t != nil)
	if !l.send(ecmd{e: e, add: true}) {
		// The loops stopped under us (cannot happen while the socket is
		// admitted, as Run stops them after every socket ended); do not
		// leak the fds.
		unix.Close(cfd)
		if pfd >= 0 {
			unix.Close(pfd)
		}
		go l.o.Host.Ended(s, relay.Counts{})
		return true
	}
	s.SetInterrupt(func() { l.send(ecmd{e: e}) })
	return true
}

// Running reports whether the loops take sockets.
func (ls *Loops) Running() bool { return ls.set.Load() != nil }

// MaxBatches are the uring loops' longest batch windows (none when they
// do not run): proxy.uring_batch, or 0 where the kernel has no min_wait.
func (ls *Loops) MaxBatches() []time.Duration {
	var out []time.Duration
	if set := ls.uset.Load(); set != nil {
		for _, l := range *set {
			out = append(out, l.maxBatch)
		}
	}
	return out
}

// UringRunning reports whether the uring loops started (they take every
// socket then).
func (ls *Loops) UringRunning() bool { return ls.uset.Load() != nil }

// detach takes c out of Go's netpoller and returns a non-blocking fd of
// the same socket: a duplicate, then the Go conn's close (which removes
// the original from the netpoller's epoll set first).
func detach(c *net.TCPConn) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) {
		fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	// O_NONBLOCK lives on the shared file description, which Go already
	// set; setting it again only makes that explicit. Before the Close, so
	// that a failure leaves c usable by the fallback.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	c.Close()
	return fd, nil
}

// eloop is one event loop.
type eloop struct {
	inbox[ecmd]
	o    *Options
	epfd int
	file *os.File        // epfd, registered with Go's netpoller
	rc   syscall.RawConn // of file

	// Owned by the loop goroutine.
	socks map[int32]*esock // by fd, client and pod
	buf   []byte
	// sealBuf is where records for a TLS client are sealed before their
	// write; it grows to one read's worth of records once.
	sealBuf  []byte
	events   [256]unix.EpollEvent
	base     time.Time
	now      int64 // nanoseconds since base, read once per batch
	nextTick int64
	armed    bool // file's read deadline is set (sockets are open)
	// poll is l.pollOnce as a func value made once: a closure built per
	// wait escaped to the heap, two allocations per wake-up (found by
	// BenchmarkRelayEcho's allocs); ready is its result.
	poll  func(uintptr) bool
	ready int
}

// ecmd is a socket to add, one that edge stopped or that is to move, or
// a move's outcome (moved).
type ecmd struct {
	e     *esock
	add   bool
	moved *moved
}

func newLoop(o *Options) (*eloop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	l := &eloop{o: o, epfd: epfd, socks: map[int32]*esock{}, buf: make([]byte, readSize), base: time.Now()}
	if err := l.inbox.open(); err != nil {
		unix.Close(epfd)
		return nil, err
	}
	l.poll = l.pollOnce
	if err := l.open(); err != nil {
		unix.Close(epfd)
		unix.Close(l.wakeFd)
		return nil, err
	}
	return l, nil
}

// open watches the wake-up eventfd and hands the epoll fd itself to Go's
// netpoller (an epoll set is pollable: readable when it has events), so
// that an idle loop parks like any goroutine instead of holding a thread
// in epoll_wait, and its tick is a read deadline.
func (l *eloop) open() error {
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, l.wakeFd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(l.wakeFd)}); err != nil {
		return err
	}
	if err := unix.SetNonblock(l.epfd, true); err != nil {
		return err
	}
	l.file = os.NewFile(uintptr(l.epfd), "epoll")
	rc, err := l.file.SyscallConn()
	if err != nil {
		return err
	}
	l.rc = rc
	return nil
}

func (l *eloop) run() {
	defer close(l.done)
	defer l.closeWake()
	defer l.file.Close()
	for {
		n := l.wait()
		l.now = int64(time.Since(l.base))
		for i := range n {
			ev := l.events[i]
			if ev.Fd == int32(l.wakeFd) {
				var b [8]byte
				unix.Read(l.wakeFd, b[:])
				continue
			}
			if e := l.socks[ev.Fd]; e != nil {
				l.handle(e, int(ev.Fd), ev.Events)
			}
		}
		if l.commands() {
			l.closeAll()
			return
		}
		if l.now >= l.nextTick || !l.armed && len(l.socks) > 0 {
			l.tick()
		}
	}
}

// wait returns the next batch of events: epoll_wait without blocking, as a
// raw syscall (no scheduler bookkeeping); when there are none, the
// goroutine parks in Go's netpoller until the epoll fd is readable or the
// tick's deadline passes (then 0).
func (l *eloop) wait() int {
	l.ready = 0
	if err := l.rc.Read(l.poll); err != nil {
		return 0 // the tick's deadline
	}
	return l.ready
}

// pollOnce is one epoll_pwait that does not block, into l.events; it
// reports whether there were events (their count in l.ready).
func (l *eloop) pollOnce(uintptr) bool {
	r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(l.epfd),
		uintptr(unsafe.Pointer(&l.events[0])), uintptr(len(l.events)), 0, 0, 0)
	if errno != 0 || r == 0 {
		l.ready = 0
		return false
	}
	l.ready = int(r)
	return true
}

// commands applies queued adds and stops; it reports whether the loop
// must quit.
func (l *eloop) commands() bool {
	q, stopped := l.take()
	for _, c := range q {
		switch {
		case c.add:
			l.register(c.e)
		case c.moved != nil:
			l.moveDone(c.e, *c.moved)
		case c.e.done, c.e.moving:
			// A stop during a move is delivered when it ends.
		case c.e.s.Resuming():
			l.startMove(c.e) // the pod left the registry
		case c.e.s.Stopped():
			l.beginClose(c.e)
		}
	}
	return stopped
}

// tick closes sockets whose client fell silent past proxy.idle_timeout (a
// half-open or dead peer: providers stream without pause) and those whose
// close frames did not go out within closeGrace. One pass every tickEvery:
// a clock read per batch, no timer or deadline per socket or per message.
func (l *eloop) tick() {
	const tickEvery = 50 * time.Millisecond
	l.nextTick = l.now + int64(tickEvery)
	defer func() {
		// No sockets, no ticks: an idle loop sleeps until woken.
		if l.armed = len(l.socks) > 0; l.armed {
			l.file.SetReadDeadline(l.base.Add(time.Duration(l.nextTick)))
		} else {
			l.file.SetReadDeadline(noDeadline)
		}
	}()
	for fd, e := range l.socks {
		if e.done || int(fd) != e.fds[0] {
			continue
		}
		switch {
		case e.closing && e.s.Over(l.now):
			l.teardown(e, relay.None)
		case !e.closing && e.dirs[0].pend != nil && e.dirs[1].pend == nil &&
			l.now-e.dirs[0].since > int64(l.o.Limits().PodWriteTimeout):
			// The pod stopped reading while the client reads: it is hung
			// (a client that does not read excuses it: backpressure).
			e.dirs[0].pend = nil
			l.ended(e, 1, relay.Stalled, relay.ErrPodStalled)
		case !e.closing:
			if _, v := e.pol.IdleLeft(l.now); v.Code != 0 && e.s.MarkStop(v.Code, v.Reason) {
				l.beginClose(e)
				continue
			}
			l.checkLive(e)
		}
	}
}

// checkLive pings a quiet pod, or ends the socket as the pod's loss when
// its ping went unanswered for the silence bound (relay.Liveness).
func (l *eloop) checkLive(e *esock) {
	f, hung := e.pol.LiveCheck(l.now)
	switch d := &e.dirs[0]; {
	case hung:
		l.ended(e, 1, relay.Stalled, relay.ErrPodHung)
	case f == nil:
	case d.pend != nil:
		d.pend = append(d.pend, f...) // behind the client's bytes waiting for the pod
	default:
		d.pend, d.since = f, l.now
		if l.flush(e, d) {
			l.update(e)
		}
	}
}

// closeAll ends the sockets still on a loop that is told to quit (Run
// stops the loops only after every socket ended, so normally none).
func (l *eloop) closeAll() {
	for fd, e := range l.socks {
		if int(fd) == e.fds[0] {
			l.teardown(e, relay.None)
		}
	}
}

// again reports an errno after which the operation is retried when epoll
// says so.
func again(e unix.Errno) bool { return e == unix.EAGAIN || e == unix.EINTR }
