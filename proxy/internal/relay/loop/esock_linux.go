//go:build linux

package loop

import (
	"golang.org/x/sys/unix"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/tls13"
)

// esock is one relayed pair on an event loop; only the loop touches it.
// What is relayed, counted and refused is pol's (relay.Policy); this file
// only moves bytes, on the loop's clock.
type esock struct {
	s   *relay.Socket
	fds [2]int // 0: client, 1: pod
	// dirs[i] reads fds[i] and writes the other: dirs[0] is client_to_pod,
	// its policy pol.Dirs[i].
	dirs [2]edir
	pol  relay.Policy
	// mask is what each fd is registered for.
	mask [2]uint32
	// closing: the socket's close began (edge's stop, or a side's end).
	// Its stages and their bounds are the socket's closing state machine
	// (relay.Closing): the close frames go out, then both connections
	// are shut for writing and the loop drains what the peers still send
	// (lingering close) until both end their streams. closing mirrors its
	// start for the reads, which check it without the machine's lock.
	closing bool
	done    bool
	// tls is the client's TLS record layer (nil: plain TCP). Bytes from
	// the client are opened as they are read; bytes to it are sealed as
	// they are queued, so dirs[1].pend holds ciphertext.
	tls *tls13.Records
	// moving: the pod's side died and the host looks for another pod
	// (emove_linux.go); neither connection is in the loop's set.
	moving bool
	mover
}

// edir is one direction of an esock.
type edir struct {
	src int // index in fds of the source; the destination is 1-src
	// pend holds bytes read but not yet written: at most one read plus a
	// close frame. While it is not empty the source is not read.
	pend []byte
	// eof: the source sent FIN.
	eof bool
	// since is the loop's clock when pend last started to wait (the
	// pod's write stall bound, see tick).
	since int64
	// owed: the socket is closing while this direction is inside a frame;
	// the rest of that frame is forwarded, then edge's close frame.
	owed bool
}

func side(i int) relay.Side {
	if i == 0 {
		return relay.Client
	}
	return relay.Pod
}

// register puts a new socket on the loop: the early bytes (sent right
// behind either handshake) are scanned and queued first.
func (l *eloop) register(e *esock) {
	e.pol.Init(e.s.Limits(l.o.Limits()), &l.o.Dirs, l.now, e.s.Ext)
	if e.fds[1] < 0 {
		l.teardown(e, relay.None)
		return
	}
	e.mover.init(e.s, &e.pol)
	for i := range e.dirs {
		d := &e.dirs[i]
		early := d.pend
		d.pend = nil
		if len(early) > 0 {
			d.pend = l.relayEarly(e, i, nil, early)
		}
	}
	for i, fd := range e.fds {
		e.mask[i] = e.want(i)
		l.socks[int32(fd)] = e
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: e.mask[i], Fd: int32(fd)}); err != nil {
			l.o.Log.Warn("epoll relay: cannot watch a media socket", "err", err, "call_sid", e.s.CallID)
			l.teardown(e, relay.None)
			return
		}
	}
	if e.s.Stopped() {
		l.beginClose(e)
		return
	}
	for i := range e.dirs {
		if e.dirs[i].pend != nil && !l.flush(e, &e.dirs[i]) {
			return
		}
	}
}

// relayEarly accounts early, bytes of direction i's source that came
// before the loop read it (behind a handshake, or behind a new pod's 101),
// and appends what goes on to dst, as the destination takes it.
func (l *eloop) relayEarly(e *esock, i int, dst, early []byte) []byte {
	if early = e.look(&e.pol, i, early); len(early) == 0 {
		return dst
	}
	n, v := e.pol.Dirs[i].Relayed(e.s, early)
	dst = e.wire(i, dst, early[:n])
	if v.Code != 0 {
		e.s.MarkStop(v.Code, v.Reason)
	}
	if len(dst) == 0 {
		return nil
	}
	return dst
}

// want is the epoll interest of fds[i]: readable while its direction may
// read (or, once the socket is closing, until its peer ends its stream, to
// drain it), writable while bytes wait for it.
func (e *esock) want(i int) uint32 {
	var m uint32
	if d := &e.dirs[i]; !d.eof && (d.pend == nil || e.closing && !d.owed) {
		m |= unix.EPOLLIN | unix.EPOLLRDHUP
	}
	if e.dirs[1-i].pend != nil {
		m |= unix.EPOLLOUT
	}
	return m
}

// update re-registers the fds whose interest changed (backpressure starts
// or ends, a side ended): never on the common path of a message.
func (l *eloop) update(e *esock) {
	for i, fd := range e.fds {
		m := e.want(i)
		if m == e.mask[i] {
			continue
		}
		e.mask[i] = m
		if m == 0 && e.closing {
			// Nothing more to read from or write to this peer: out of
			// the set, or its hang-up would be reported forever while
			// the other peer lingers. teardown's own DEL then fails
			// harmlessly.
			unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
			continue
		}
		unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: m, Fd: int32(fd)})
	}
}

func (l *eloop) handle(e *esock, fd int, ev uint32) {
	i := 0
	if fd == e.fds[1] {
		i = 1
	}
	if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 && e.dirs[1-i].pend != nil {
		if !l.flush(e, &e.dirs[1-i]) {
			return
		}
	}
	if e.mask[i]&unix.EPOLLIN != 0 && ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
		if !l.read(e, &e.dirs[i]) {
			return
		}
	}
	if ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0 && e.mask[i]&unix.EPOLLIN == 0 && !e.done && !e.closing {
		// Both ways of this connection are shut or it failed, and nothing
		// is left to read from it: level-triggered epoll would report it
		// forever.
		l.teardown(e, side(i))
	}
}

// read moves one read of d's source to its destination; false when the
// socket ended.
func (l *eloop) read(e *esock, d *edir) bool {
	t := e.tls
	if d.src != 0 {
		t = nil
	}
	buf := l.buf
	if t != nil {
		// Room in front for the start of a record read before.
		buf = l.buf[len(t.Part()):]
	}
	n, errno := relay.RawRead(e.fds[d.src], buf)
	if again(errno) {
		return true
	}
	ended := errno != 0 || n == 0
	var b []byte
	switch {
	case ended:
	case t != nil && e.closing && !d.owed:
		return true // lingering: dropped unread, not even opened
	case t != nil:
		m := copy(l.buf, t.Part())
		p, err := t.Open(l.buf[:m+n], l.now)
		if err != nil {
			return l.tlsFailed(e, err)
		}
		b = l.buf[:p]
		if t.OwedUpdate() && !l.answerKeyUpdate(e) {
			return false
		}
	default:
		b = l.buf[:n]
	}
	// The client's close_notify ends its stream after b, as a FIN would.
	peerEnd := t != nil && t.PeerClosed()
	switch {
	case e.closing:
		if !ended && d.owed && len(b) > 0 && !l.finishFrame(e, d, b) {
			return false
		}
		if ended || peerEnd {
			d.owed = false
			how := relay.EOF
			if errno != 0 {
				how = relay.Failed
			}
			l.gone(e, d.src, how)
			return l.settle(e)
		}
		// Lingering: what a peer still sends is dropped.
		return true
	case errno != 0:
		if d.src == 1 {
			return l.ended(e, 1, relay.Failed, errno)
		}
		l.teardown(e, side(d.src))
		return false
	case n == 0:
		return l.ended(e, d.src, relay.EOF, relay.ErrPodEOF)
	}
	if d.src == 0 {
		e.pol.ClientSent(l.now)
	} else {
		e.pol.Live.Heard(l.now)
	}
	if b = e.look(&e.pol, d.src, b); len(b) == 0 {
		return true
	}
	n, v := e.pol.Dirs[d.src].Relayed(e.s, b)
	out := b[:n]
	if d.src == 1 && e.tls != nil && n > 0 {
		out = e.tls.Seal(l.sealBuf[:0], tls13.RecordTypeData, out)
		l.sealBuf = out[:0]
	}
	w := 0
	if len(out) > 0 {
		w, errno = relay.RawWrite(e.fds[1-d.src], out)
	}
	if w < 0 {
		w = 0
	}
	if errno != 0 && !again(errno) {
		if d.src == 0 {
			return l.ended(e, 1, relay.Failed, errno)
		}
		l.teardown(e, side(1-d.src))
		return false
	}
	if w < len(out) {
		// The destination is full: keep the rest, stop reading the source
		// until it is out (backpressure through TCP, nothing queues).
		d.pend = append(make([]byte, 0, len(out)-w), out[w:]...)
		d.since = l.now
		l.update(e)
	}
	if v.Code != 0 && e.s.MarkStop(v.Code, v.Reason) {
		l.beginClose(e)
		return !e.done
	}
	if peerEnd {
		return l.ended(e, 0, relay.EOF, nil)
	}
	return true
}

// ended: fds[i]'s stream ended, how (cause says why, for the pod's log
// line), on a socket whose close has not begun: edge's close, or the
// close of that side's end, as endedOpen decides. False when the socket
// ended.
func (l *eloop) ended(e *esock, i int, how relay.End, cause error) bool {
	e.dirs[i].eof = true
	if endedOpen(&l.o.Env, e.s, side(i), how, cause, l.now) {
		l.beginClose(e)
		return !e.done
	}
	if e.s.Resuming() {
		l.startMove(e)
		return false
	}
	e.closing = true
	return l.settle(e)
}

// gone: fds[i]'s stream ended, how, on a closing socket (its end costs no
// pod then: the close began with edge's stop or a side's end).
func (l *eloop) gone(e *esock, i int, how relay.End) {
	e.dirs[i].eof = true
	e.s.Ended(side(i), how)
}

// flush writes d's pending bytes; false when the socket ended.
func (l *eloop) flush(e *esock, d *edir) bool {
	w, errno := relay.RawWrite(e.fds[1-d.src], d.pend)
	if errno != 0 && !again(errno) {
		if e.closing {
			// That peer is gone: nothing more goes to it or comes from it.
			d.pend, d.owed = nil, false
			l.gone(e, 1-d.src, relay.Failed)
			return l.settle(e)
		}
		if d.src == 0 {
			return l.ended(e, 1, relay.Failed, errno)
		}
		l.teardown(e, side(1-d.src))
		return false
	}
	if d.pend = d.pend[w:]; len(d.pend) > 0 {
		if w > 0 {
			d.since = l.now // progress: the stall bound starts over
		}
		return true
	}
	d.pend = nil
	if e.closing {
		return l.settle(e)
	}
	l.update(e)
	return true
}

// finishFrame forwards, on a closing socket, the part of b that ends d's
// frame in flight, then edge's close frame; the rest of b is dropped.
func (l *eloop) finishFrame(e *esock, d *edir, b []byte) bool {
	i := d.src
	n, f, done := finish(&e.pol.Dirs[i], e.s, b)
	d.pend = e.wire(i, d.pend, b[:n])
	if done {
		d.owed = false
		if f != nil {
			d.pend = e.wire(i, d.pend, f)
		}
	}
	if len(d.pend) == 0 {
		d.pend = nil
		l.update(e)
		return true
	}
	return l.flush(e, d)
}

// settle moves a closing socket on: once edge's last bytes (close frames
// included) are written, both connections are shut for writing and
// drained (lingering close, see linger) until both peers end their
// streams, then torn down; the socket's closing state machine says when,
// and bounds each stage (tick checks the bounds). False when the socket
// ended.
func (l *eloop) settle(e *esock) bool {
	if e.dirs[0].pend != nil || e.dirs[1].pend != nil || e.dirs[0].owed || e.dirs[1].owed {
		l.update(e)
		return true
	}
	if t := e.tls; t != nil && !t.CloseSent() {
		// A TLS client hears close_notify before the TCP FIN (RFC 8446
		// 6.1), as crypto/tls's CloseWrite does it.
		e.dirs[1].pend = t.CloseNotify()
		if !l.flush(e, &e.dirs[1]) {
			return false
		}
		if e.dirs[1].pend != nil && !e.done {
			l.update(e) // the rest when the client can take it
		}
		return !e.done
	}
	if e.s.Shut(l.now) {
		for _, fd := range e.fds {
			unix.Shutdown(fd, unix.SHUT_WR)
		}
	}
	if e.s.Over(l.now) {
		l.teardown(e, relay.None)
		return false
	}
	l.update(e)
	return true
}

// beginClose ends the socket for edge's stop code: the policy's close
// frame into each peer that is owed one, then the lingering close
// (settle), bounded by closeGrace and lingerTime.
func (l *eloop) beginClose(e *esock) {
	if e.done || e.closing || !e.s.Begin(l.now) {
		// Ending already (a side's FIN): no close frame after it.
		return
	}
	e.closing = true
	owed, frames := closeStart(&e.pol, e.s, [2]bool{e.dirs[0].eof, e.dirs[1].eof})
	for i := range e.dirs {
		d := &e.dirs[i]
		d.owed = d.owed || owed[i] // the frame in flight first (finishFrame)
		if frames[i] != nil {
			d.pend = e.wire(i, d.pend, frames[i])
		}
	}
	for i := range e.dirs {
		if e.dirs[i].pend != nil && !l.flush(e, &e.dirs[i]) {
			return
		}
	}
	l.settle(e)
}

// teardown closes both connections and hands the socket's end (metrics,
// release, which waits on Redis) to a goroutine of its own, off the loop.
// by is the side whose failure ended it (relay.None: none or edge).
func (l *eloop) teardown(e *esock, by relay.Side) {
	if e.done {
		return
	}
	e.done = true
	e.s.TornDown(by)
	for _, fd := range e.fds {
		if fd < 0 {
			continue
		}
		if l.socks[int32(fd)] == e {
			delete(l.socks, int32(fd))
			unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		}
		unix.Close(fd)
	}
	e.dirs[0].pend, e.dirs[1].pend = nil, nil
	if e.tls != nil {
		e.tls.Wipe()
	}
	c := e.pol.Counts() // the socket's counts, as they are now
	go l.o.Host.Ended(e.s, c)
}
