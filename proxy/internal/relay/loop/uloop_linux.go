//go:build linux

package loop

import (
	"errors"
	"net"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/proxy/internal/iouring"
	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// The io_uring relay (proxy.relay: uring). The epoll loops
// make one read and one write system call per message, and with a frame
// per 20 ms per stream nothing batches within a socket. Here the batch is
// across sockets: each socket-direction keeps one recv in the kernel; its
// completion goes through the same policy (relay.Policy) as the epoll loop's
// reads, and the bytes go out as a send linked to the next recv into the
// same buffer (IOSQE_IO_LINK), all sockets' SQEs submitted together in the
// loop's next io_uring_enter.
//
// Each loop runs on a locked thread of its own, the ring's only submitter
// (SINGLE_ISSUER|DEFER_TASKRUN, Linux 6.1): the completions' kernel work
// runs in one batch inside the loop's wait, not as interrupts of whatever
// thread submitted. The wait is a raw system call, so the thread keeps
// its P: no hand-off to another thread per wait, no sysmon wake-ups (both
// measured to eat the gain, docs/bench-media.md). A signal (the GC's or
// sysmon's preemption) ends the wait with EINTR, and startUring raises
// GOMAXPROCS by the loop count, so that the P held in a wait, which uses
// no CPU, is not taken from the rest of edge. With Config.UringBatch the
// wait holds each batch open for more completions (min_wait, Linux 6.13).
//
// A recv waiting in the kernel holds no buffer: the kernel picks one from
// the loop's provided-buffer ring when bytes arrive, and the loop gives it
// back once they are sent. When the ring is empty (more data waiting to be
// sent than it holds, say behind peers that do not read), the direction
// that found it empty receives once into a buffer of its own.
//
// A TLS client's records (package tls13) are opened as they are received
// and sealed as they are sent, as on the epoll loops. Not built: cancelling
// one stuck send (a pod that stops reading is found by
// PodWriteTimeout, a socket that ends by the close grace: both shut the
// socket down, which completes its operations in the kernel).

// uringBufSize is one receive buffer: one media frame is about 400
// bytes, and a bigger message takes more receives. RingBufs is how many
// a loop has (8192: 16 MiB of address space, resident only as far as the
// load uses them; a variable for the test of an empty ring). A buffer is
// held from its recv's completion to its send's: a batch's worth, plus
// the sends stuck on peers that do not read.
const uringBufSize = 2 << 10

var RingBufs = 8192

// uringRingEntries is the buffer ring's size, the most buffers put ahead
// in it; each pass puts twice what the last batch used, at least
// uringAheadMin.
const (
	uringRingEntries = 1024
	uringAheadMin    = 64
)

// uringEntries is each ring's submission slots: at most two SQEs per
// completion, and the ring is submitted whenever it fills.
const uringEntries = 4096

// Kinds of operation, the low bits of an SQE's user_data (the rest is the
// socket's slot in uloop.socks).
const (
	udRecv = 0 // +i: the recv of dirs[i]
	udSend = 2 // +i: the send of dirs[i] (to the other fd)
	udWake = 4
	// udCancel is a cancel's own completion (startMove), which nothing
	// waits for.
	udCancel = 5
	udShift  = 3
)

// usock is one relayed pair on a uloop; only the loop touches it.
type usock struct {
	s    *relay.Socket
	fds  [2]int // 0: client, 1: pod
	dirs [2]udir
	pol  relay.Policy
	slot uint32
	// inflight counts this socket's operations in the kernel: its slot
	// (and buffers) are reused only once none is.
	inflight int
	// closing: the socket's close began; its stages and their bounds are
	// the socket's closing state machine (relay.Closing), closing mirrors
	// its start for the completions, which check it without the machine's
	// lock. done: torn down.
	closing, done bool
	// tls is the client's record layer (nil: plain TCP), as esock's.
	tls *tls13.Records
	// moving: the pod's side died and the socket moves (umove_linux.go),
	// since movedAt; resuming: the host looks for another pod, none of
	// the socket's operations in the kernel. left holds the provider's
	// bytes received during the move (one receive at most).
	moving, resuming bool
	movedAt          int64
	left             []byte
	mover
}

// udir is one direction: dirs[i] receives from fds[i] and sends to the
// other.
type udir struct {
	// own is the buffer of a recv made when the ring ran dry (useOwn:
	// the next recv takes one), nil otherwise.
	own    []byte
	useOwn bool
	// out is what the send in flight writes (it keeps the bytes alive
	// while the kernel reads them); outBid its ring buffer, or -1.
	out              []byte
	outBid           int32
	recving, sending bool
	eof, owed        bool
	// next waits for the send in flight, then goes out (a close frame, a
	// KeyUpdate, a receive's bytes that came meanwhile), followed by a
	// recv of the direction when recvAfter: a direction has one send in
	// the kernel at a time, so its bytes go out in order.
	next      []byte
	recvAfter bool
	since     int64
	// tlsBuf is the direction's bytes of a TLS client, reused: the
	// plaintext opened for the pod (dirs[0]) or the records sealed for
	// the client (dirs[1]). Not touched while a send from it is in flight.
	tlsBuf []byte
}

// uloop is one io_uring event loop.
type uloop struct {
	inbox[ucmd]
	o    *Options
	r    *iouring.Ring
	bufs *iouring.BufRing
	// used counts the ring buffers the last pass's completions took.
	used int
	// maxBatch is Config.UringBatch where the kernel has min_wait; batch
	// is the window in use, sized from the load (batchWindow).
	maxBatch, batch time.Duration

	// Owned by the loop's thread.
	socks    []*usock
	free     []uint32
	open     int
	base     time.Time
	now      int64
	nextTick int64
	complete func(iouring.CQE)
	// scratch holds a TLS client's partial record and the bytes received
	// behind it while they are opened.
	scratch []byte
}

// ucmd is a socket to add, one that edge stopped or that is to move, or
// a move's outcome (moved).
type ucmd struct {
	e     *usock
	add   bool
	moved *moved
}

// startUring starts the uring loops, or reports why io_uring cannot be
// used here (the epoll loops then carry every socket).
func (ls *Loops) startUring(o *Options) error {
	n := Count(runtime.GOMAXPROCS(0))
	batch := o.UringBatch
	set := make([]*uloop, 0, n)
	for range n {
		l, err := newUloop(o, batch)
		if err != nil {
			for _, l := range set {
				l.quit()
			}
			return err
		}
		if l.maxBatch != batch {
			o.Log.Warn("proxy.uring_batch needs Linux 6.13 (io_uring min_wait): the uring relay runs without a batch window", "uring_batch", batch)
			batch = 0
		}
		set = append(set, l)
	}
	// Each loop's thread holds a P while it waits in the kernel: give the
	// runtime one more per loop. (Setting GOMAXPROCS ends the runtime's own
	// updates of it from the container's CPU limit; the value is derived
	// from the one in force at start.)
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + n)
	ls.uprocs = n
	ls.uset.Store(&set)
	o.Log.Info("uring relay started", "loops", n, "uring_batch", batch, "gomaxprocs", procs+n)
	return nil
}

func (ls *Loops) stopUring() {
	if set := ls.uset.Swap(nil); set != nil {
		for _, l := range *set {
			l.quit()
		}
		runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)-ls.uprocs))
	}
}

// addUring puts a socket on a uring loop; t is its client's TLS takeover
// (nil: plain TCP).
func (ls *Loops) addUring(set []*uloop, s *relay.Socket, cc, pc *net.TCPConn, podEarly, early []byte, t *tls13.Takeover) bool {
	l := set[int(ls.next.Add(1))%len(set)]
	cfd, err := detach(cc)
	if err != nil {
		return false
	}
	pfd, err := detach(pc)
	if err != nil {
		// As loops.add: end the socket through the loop.
		pc.Close()
		pfd = -1
	}
	e := &usock{s: s, fds: [2]int{cfd, pfd}}
	if t != nil {
		e.tls = t.Records()
	}
	e.dirs[0].out, e.dirs[1].out = early, podEarly
	s.Client = nil
	s.SetPod(nil)
	// Counted before the loop can relay a byte or end the socket, as on
	// the epoll loops.
	l.o.Carried(true, t != nil)
	if !l.send(ucmd{e: e, add: true}) {
		unix.Close(cfd)
		if pfd >= 0 {
			unix.Close(pfd)
		}
		go l.o.Host.Ended(s, relay.Counts{})
		return true
	}
	s.SetInterrupt(func() { l.send(ucmd{e: e}) })
	return true
}

// NewRing makes a loop's ring; a variable so that a test can refuse
// io_uring as a kernel or seccomp profile would.
var NewRing = func() (*iouring.Ring, error) { return iouring.New(uringEntries, iouring.SetupDeferTaskrun) }

// newUloop starts a loop on a thread of its own, which creates the ring:
// with SINGLE_ISSUER the ring belongs to the thread that made it.
func newUloop(o *Options, batch time.Duration) (*uloop, error) {
	l := &uloop{o: o, base: time.Now()}
	if err := l.inbox.open(); err != nil {
		return nil, err
	}
	l.complete = l.completed
	started := make(chan error)
	go l.run(batch, started)
	if err := <-started; err != nil {
		unix.Close(l.wakeFd)
		return nil, err
	}
	return l, nil
}

// run is the loop, on its locked thread: it waits in io_uring_enter
// (which also runs the deferred kernel work of every completion that came
// meanwhile, in one batch), handles the completions and commands, and
// every 50 ms sweeps the sockets for timeouts.
func (l *uloop) run(batch time.Duration, started chan<- error) {
	runtime.LockOSThread()
	r, err := NewRing()
	if err != nil {
		started <- err
		return
	}
	if !r.MinWait() {
		batch = 0
	}
	bufs, err := r.NewBufRing(min(uringRingEntries, RingBufs), RingBufs, uringBufSize, uringAheadMin)
	if err != nil {
		r.Close()
		started <- err
		return
	}
	l.r, l.bufs, l.maxBatch = r, bufs, batch
	l.sqe().PollIn(l.wakeFd, udWake)
	started <- nil
	defer close(l.done)
	defer func() {
		l.closeWake()
		r.Close()
		if bufs != nil {
			bufs.Close()
		}
	}()
	const tickEvery = 50 * time.Millisecond
	// Completions reaped since the tick at tickAt: the load that sizes the
	// batch window.
	reaped, tickAt := 0, int64(0)
	for {
		var timeout time.Duration
		if l.open > 0 {
			timeout = max(time.Duration(l.nextTick-int64(time.Since(l.base))), time.Microsecond)
		}
		if err := r.SubmitWait(timeout, l.batch, uringEntries); err != nil {
			l.o.Log.Error("uring relay: io_uring_enter failed", "err", err)
		}
		l.now = int64(time.Since(l.base))
		reaped += r.Reap(l.complete)
		l.bufs.TopUp(max(uringAheadMin, 2*l.used))
		l.used = 0
		if l.commands() {
			l.closeAll()
			if !l.settleInflight() {
				// Something may still write into the buffers: leave
				// them mapped (the process is stopping).
				bufs = nil
			}
			return
		}
		if l.open > 0 && l.now >= l.nextTick {
			l.nextTick = l.now + int64(tickEvery)
			l.batch = batchWindow(reaped, time.Duration(l.now-tickAt), l.maxBatch)
			reaped, tickAt = 0, l.now
			l.sweep()
		}
	}
}

// settleInflight waits, up to a second, for the operations still in the kernel
// to complete once closeAll shut every socket down, so that none writes
// into a buffer after it is unmapped; it reports whether they did.
func (l *uloop) settleInflight() bool {
	deadline := time.Now().Add(time.Second)
	for {
		busy := false
		for _, e := range l.socks {
			busy = busy || e != nil && e.inflight > 0
		}
		if !busy {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		l.r.SubmitWait(10*time.Millisecond, 0, 1)
		l.r.Reap(l.complete)
	}
}

// batchTarget is the completions a batch window aims to gather: enough
// that one wait (a system call, a sleep and a wake-up) is shared by
// several messages, few enough that a message waits no longer than that.
const batchTarget = 16

// batchWindow sizes the window from the completion rate of the last tick
// (n in elapsed): long enough to gather about batchTarget completions, at
// most maxWindow, and none when maxWindow would not gather a quarter of
// them (a lightly loaded loop pays the latency and saves nothing). So the
// window, and with it the latency edge adds, shrinks as the load grows,
// while each wait still carries about batchTarget completions. (Ending
// the wait as soon as batchTarget completions came instead measured
// 0.64x nginx's CPU per message against 0.42-0.56x, for 0.1-0.3 ms
// less at p50: docs/bench-media.md.)
func batchWindow(n int, elapsed, maxWindow time.Duration) time.Duration {
	if maxWindow <= 0 || n <= 0 || elapsed <= 0 {
		return 0
	}
	expected := float64(n) * float64(maxWindow) / float64(elapsed)
	if expected < batchTarget/4 {
		return 0
	}
	return min(maxWindow, time.Duration(float64(maxWindow)*batchTarget/expected))
}

// sqe returns a free SQE, submitting the full ring first when needed.
func (l *uloop) sqe() *iouring.SQE {
	for {
		if s := l.r.Get(); s != nil {
			return s
		}
		l.r.Enter(0, true)
	}
}

// room makes sure n SQEs fit without a submit in between (a link must
// not be split across submissions).
func (l *uloop) room(n uint32) {
	if !l.r.Room(n) {
		l.r.Enter(0, true)
	}
}

// commands applies queued adds and stops; it reports whether the loop
// must quit.
func (l *uloop) commands() bool {
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

// sweep is the tick's pass over the sockets: it tears down those whose
// close stage's bound passed, ends those whose pod stopped reading while
// the client reads, and stops those whose client fell silent past
// proxy.idle_timeout.
func (l *uloop) sweep() {
	for _, e := range l.socks {
		if e == nil || e.done {
			continue
		}
		if e.moving {
			switch waited := l.now - e.movedAt; {
			case e.resuming:
			case waited > 2*int64(closeGrace):
				// The provider does not take what the dead pod sent
				// it: its send fails, and nothing moves.
				unix.Shutdown(e.fds[0], unix.SHUT_RDWR)
			case waited > int64(closeGrace) && e.fds[1] >= 0:
				// A pod that left the registry does not take its
				// leave frame: cut.
				unix.Shutdown(e.fds[1], unix.SHUT_RDWR)
			}
			continue
		}
		switch {
		case e.closing && e.s.Over(l.now):
			l.teardown(e, relay.None)
		case !e.closing && e.dirs[0].sending && !e.dirs[1].sending &&
			l.now-e.dirs[0].since > int64(l.o.Limits().PodWriteTimeout):
			// The pod stopped reading while the client reads: hung. Its
			// send stays in the kernel until the close grace ends it.
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
func (l *uloop) checkLive(e *usock) {
	switch f, hung := e.pol.LiveCheck(l.now); {
	case hung:
		l.ended(e, 1, relay.Stalled, relay.ErrPodHung)
	case f != nil:
		// Behind a send to the pod in flight, if any (sendBuf queues it).
		l.sendBuf(e, 0, f, -1, false)
	}
}

func (l *uloop) closeAll() {
	for _, e := range l.socks {
		if e != nil {
			l.teardown(e, relay.None)
		}
	}
}

// register puts a new socket on the loop: its early bytes (held in
// dirs[i].out by addUring) go out first, then each direction receives.
func (l *uloop) register(e *usock) {
	e.pol.Init(e.s.Limits(l.o.Limits()), &l.o.Dirs, l.now, e.s.Ext)
	e.mover.init(e.s, &e.pol)
	if n := len(l.free); n > 0 {
		e.slot, l.free = l.free[n-1], l.free[:n-1]
		l.socks[e.slot] = e
	} else {
		e.slot = uint32(len(l.socks))
		l.socks = append(l.socks, e)
	}
	l.open++
	if e.fds[1] < 0 {
		l.teardown(e, relay.None)
		return
	}
	for i := range e.dirs {
		d := &e.dirs[i]
		d.outBid = -1
		early := d.out
		d.out = nil
		n, v := 0, relay.Verdict{}
		if len(early) > 0 {
			early = e.look(&e.pol, i, early)
			n, v = e.pol.Dirs[i].Relayed(e.s, early)
		}
		if v.Code != 0 {
			e.s.MarkStop(v.Code, v.Reason)
		}
		if n > 0 {
			l.sendOut(e, i, e.wire(i, early[:n]), v.Code == 0)
		} else if v.Code == 0 {
			l.recv(e, i, false)
		}
	}
	if e.s.Stopped() {
		l.beginClose(e)
	}
}

func (e *usock) ud(kind int) uint64 { return uint64(e.slot)<<udShift | uint64(kind) }

func (l *uloop) recv(e *usock, i int, pollFirst bool) {
	d := &e.dirs[i]
	d.recving = true
	e.inflight++
	s := l.sqe()
	if d.useOwn {
		if d.own == nil {
			d.own = make([]byte, uringBufSize)
		}
		s.Recv(e.fds[i], d.own, e.ud(udRecv+i))
	} else {
		s.RecvSelect(e.fds[i], uringBufSize, e.ud(udRecv+i))
	}
	if pollFirst {
		s.PollFirst()
	}
}

// sendOut sends b to dirs[i]'s destination; with thenRecv, the next recv of
// the direction's source is linked behind it: it starts once b is all out,
// in the same submission.
func (l *uloop) sendOut(e *usock, i int, b []byte, thenRecv bool) {
	l.sendBuf(e, i, b, -1, thenRecv)
}

// sendBuf is sendOut of bytes in the ring's buffer bid (-1: none), which
// goes back to the ring when the send completes.
func (l *uloop) sendBuf(e *usock, i int, b []byte, bid int32, thenRecv bool) {
	d := &e.dirs[i]
	if d.sending {
		// Behind the send in flight (sent sends it next), copied: a ring
		// buffer bid goes back when its receive is handled (received).
		d.next = append(d.next, b...)
		d.recvAfter = d.recvAfter || thenRecv
		return
	}
	d.sending, d.out, d.outBid, d.since = true, b, bid, l.now
	e.inflight++
	l.room(2)
	s := l.sqe()
	s.Send(e.fds[1-i], b, e.ud(udSend+i))
	if thenRecv {
		// A recv right after the previous one drained the socket finds
		// nothing: arm its poll first.
		s.Link()
		l.recv(e, i, true)
	}
}

func (l *uloop) completed(c iouring.CQE) {
	kind := int(c.UserData & (1<<udShift - 1))
	if kind == udWake {
		var b [8]byte
		relay.RawRead(l.wakeFd, b[:])
		l.sqe().PollIn(l.wakeFd, udWake)
		return
	}
	if kind == udCancel {
		return
	}
	e := l.socks[c.UserData>>udShift]
	e.inflight--
	switch kind {
	case udRecv, udRecv + 1:
		l.received(e, kind-udRecv, c)
	case udSend, udSend + 1:
		l.sent(e, kind-udSend, c.Res)
	}
	if e.moving {
		l.quiet(e)
	}
	if e.done && e.inflight == 0 && l.socks[e.slot] == e {
		l.socks[e.slot] = nil
		l.free = append(l.free, e.slot)
	}
}

// received handles a recv's completion c: c.Res bytes (in the ring's
// buffer c names, or the direction's own), 0 for the source's FIN, or
// -errno. A ring buffer not handed to a send goes back at once.
func (l *uloop) received(e *usock, i int, c iouring.CQE) {
	d := &e.dirs[i]
	d.recving = false
	res, bid := c.Res, int32(-1)
	var b []byte
	ringBuf, fromRing := c.Buffer()
	switch {
	case fromRing:
		bid = int32(ringBuf)
		b = l.bufs.Buf(ringBuf, int(max(res, 0)))
		l.bufs.Taken()
		l.used++
		ringBid := bid
		defer func() {
			if d.outBid != ringBid {
				l.release(ringBid)
			}
		}()
	case res > 0:
		b = d.own[:res]
	}
	// An own buffer serves one receive (its bytes live on in the send):
	// a direction keeps none once the ring has buffers again.
	d.own = nil
	d.useOwn = false
	if e.done || res == -int32(unix.ECANCELED) {
		// Cancelled: the send linked before it failed (sent handles it).
		return
	}
	if res == iouring.NoBufs {
		// The ring is empty: this direction receives once into its own
		// buffer, and the next top-up puts more ahead.
		l.used++
		l.o.UringOwnBufs.Inc()
		d.useOwn = true
		if !e.moving {
			l.recv(e, i, false)
		}
		return
	}
	if res == -int32(unix.EAGAIN) || res == -int32(unix.EINTR) {
		if !e.moving {
			l.recv(e, i, true)
		}
		return
	}
	if e.moving && (i == 1 || e.tls == nil) {
		l.movingReceived(e, i, res, b, false)
		return
	}
	// The client's close_notify ends its stream after b, as a FIN would.
	peerEnd := false
	if i == 0 && e.tls != nil && res > 0 {
		if e.closing && !d.owed {
			l.recv(e, i, true) // lingering: dropped unread, not even opened
			return
		}
		plain, err := l.openTLS(e, d, b)
		if err != nil {
			l.tlsFailed(e, err)
			return
		}
		b, bid, peerEnd = plain, -1, e.tls.PeerClosed()
		if e.tls.OwedUpdate() && !e.moving {
			l.answerKeyUpdate(e)
		}
	}
	if e.moving {
		l.movingReceived(e, i, res, b, peerEnd)
		return
	}
	if e.closing {
		switch {
		case res > 0 && d.owed:
			if peerEnd {
				l.gone(e, i, relay.EOF)
			}
			l.finishFrame(e, i, b)
			if peerEnd && d.owed {
				d.owed = false
				l.settle(e)
			}
		case res <= 0:
			d.owed = false
			how := relay.EOF
			if res < 0 {
				how = relay.Failed
			}
			l.gone(e, i, how)
			l.settle(e)
		default:
			l.recv(e, i, true) // lingering: dropped
		}
		return
	}
	switch {
	case res < 0 && i == 1:
		l.ended(e, 1, relay.Failed, unix.Errno(-res))
		return
	case res < 0:
		l.teardown(e, side(i))
		return
	case res == 0:
		l.ended(e, i, relay.EOF, relay.ErrPodEOF)
		return
	}
	if i == 0 {
		e.pol.ClientSent(l.now)
	} else {
		e.pol.Live.Heard(l.now)
	}
	if b = e.look(&e.pol, i, b); len(b) == 0 && !peerEnd {
		l.recv(e, i, true)
		return
	}
	n, v := e.pol.Dirs[i].Relayed(e.s, b)
	stop := v.Code != 0 && e.s.MarkStop(v.Code, v.Reason)
	out := b[:n]
	if i == 1 && e.tls != nil && n > 0 {
		out, bid = l.sealTLS(e, d, out), -1
	}
	if n > 0 {
		l.sendBuf(e, i, out, bid, !stop && !peerEnd)
	} else if !stop && !peerEnd {
		l.recv(e, i, true)
	}
	switch {
	case stop:
		l.beginClose(e)
	case peerEnd:
		l.ended(e, i, relay.EOF, nil)
	}
}

// release gives ring buffer bid back (to the ring at the next top-up).
func (l *uloop) release(bid int32) {
	l.bufs.Put(uint16(bid))
}

// sent handles a send's completion: all of dirs[i].out, or a failure.
func (l *uloop) sent(e *usock, i int, res int32) {
	d := &e.dirs[i]
	d.sending = false
	want := len(d.out)
	d.out = nil
	if d.outBid >= 0 {
		l.release(d.outBid)
		d.outBid = -1
	}
	if e.done {
		return
	}
	if e.moving {
		l.movingSent(e, i, int(res) < want)
		return
	}
	if int(res) < want {
		// A linked recv comes back cancelled.
		switch {
		case e.closing:
			// That peer is gone: nothing more goes to it or comes
			// from it.
			d.next, d.recvAfter, d.owed = nil, false, false
			l.gone(e, 1-i, relay.Failed)
			l.settle(e)
		case i == 0:
			err := error(errShortSend)
			if res < 0 {
				err = unix.Errno(-res)
			}
			l.ended(e, 1, relay.Failed, err)
		default:
			// The send to the client failed: the client's end.
			l.teardown(e, relay.Client)
		}
		return
	}
	if b := d.next; b != nil {
		thenRecv := d.recvAfter && !e.closing
		d.next, d.recvAfter = nil, false
		l.sendOut(e, i, b, thenRecv)
		return
	}
	if e.closing {
		l.settle(e)
	}
}

var errShortSend = errors.New("short send")

// ended: fds[i]'s stream ended, how (cause says why, for the pod's log
// line), on a socket whose close has not begun: edge's close, or the
// close of that side's end, as endedOpen decides.
func (l *uloop) ended(e *usock, i int, how relay.End, cause error) {
	e.dirs[i].eof = true
	if endedOpen(&l.o.Env, e.s, side(i), how, cause, l.now) {
		l.beginClose(e)
		return
	}
	if e.s.Resuming() {
		l.startMove(e)
		return
	}
	e.closing = true
	l.settle(e)
}

// gone: fds[i]'s stream ended, how, on a closing socket (its end costs no
// pod then: the close began with edge's stop or a side's end).
func (l *uloop) gone(e *usock, i int, how relay.End) {
	e.dirs[i].eof = true
	e.s.Ended(side(i), how)
}

// finishFrame forwards, on a closing socket, the part of b (a recv's
// bytes) that ends dirs[i]'s frame in flight, then edge's close frame;
// the rest of b is dropped.
func (l *uloop) finishFrame(e *usock, i int, b []byte) {
	d := &e.dirs[i]
	n, f, done := finish(&e.pol.Dirs[i], e.s, b)
	out := append([]byte(nil), b[:n]...)
	if done {
		d.owed = false
		out = append(out, f...)
	}
	if len(out) > 0 {
		l.sendOut(e, i, e.wire(i, out), false)
	}
	l.settle(e)
}

// beginClose ends the socket for edge's stop code: the policy's close
// frame to each peer that is owed one (behind a send in flight), then the
// lingering close (settle), bounded by closeGrace and lingerTime.
func (l *uloop) beginClose(e *usock) {
	if e.done || e.closing || !e.s.Begin(l.now) {
		// Ending already (a side's FIN): no close frame after it.
		return
	}
	e.closing = true
	owed, frames := closeStart(&e.pol, e.s, [2]bool{e.dirs[0].eof, e.dirs[1].eof})
	for i := range e.dirs {
		if owed[i] {
			e.dirs[i].owed = true // the frame in flight first (finishFrame)
		}
		if frames[i] != nil {
			l.sendOut(e, i, e.wire(i, frames[i]), false)
		}
	}
	l.settle(e)
}

// settle moves a closing socket on: once edge's last bytes (close frames
// included) are sent, both connections are shut for writing; every
// direction not at its end keeps a recv in the kernel, to drain the peers
// (lingering close) or to finish a frame in flight, until the socket's
// closing state machine says the close is over.
func (l *uloop) settle(e *usock) {
	if e.done {
		return
	}
	busy := false
	for i := range e.dirs {
		d := &e.dirs[i]
		busy = busy || d.sending || d.next != nil || d.owed
	}
	if t := e.tls; !busy && t != nil && !t.CloseSent() {
		// A TLS client hears close_notify before the TCP FIN (RFC 8446
		// 6.1); settle goes on once it is out.
		l.sendOut(e, 1, t.CloseNotify(), false)
		busy = true
	}
	if !busy {
		if e.s.Shut(l.now) {
			for _, fd := range e.fds {
				unix.Shutdown(fd, unix.SHUT_WR)
			}
		}
		if e.s.Over(l.now) {
			l.teardown(e, relay.None)
			return
		}
	}
	for i := range e.dirs {
		if d := &e.dirs[i]; !d.eof && !d.recving && !d.sending {
			l.recv(e, i, false)
		}
	}
}

// teardown closes both connections; shutting them down first ends the
// operations still in the kernel (a recv completes with 0, a send fails),
// whose completions then free the socket's slot.
func (l *uloop) teardown(e *usock, by relay.Side) {
	if e.done {
		return
	}
	e.done = true
	if e.moving {
		// The provider's end (or a broken record) came during the move,
		// before the host was asked: the dead pod's end is recorded.
		e.moving = false
		l.o.ResumeFailed(e.s)
	}
	e.s.TornDown(by)
	for _, fd := range e.fds {
		if fd >= 0 {
			unix.Shutdown(fd, unix.SHUT_RDWR)
			unix.Close(fd)
		}
	}
	l.open--
	if e.inflight == 0 {
		l.socks[e.slot] = nil
		l.free = append(l.free, e.slot)
	}
	if e.tls != nil {
		e.tls.Wipe()
	}
	c := e.pol.Counts()
	go l.o.Host.Ended(e.s, c)
}
