//go:build linux

package proxy

import "golang.org/x/sys/unix"

// esock is one relayed pair on an event loop; only the loop touches it.
// What is relayed, counted and refused is pol's (policy.go); this file
// only moves bytes, on the loop's clock.
type esock struct {
	s   *socket
	fds [2]int // 0: client, 1: pod
	// dirs[i] reads fds[i] and writes the other: dirs[0] is client_to_pod,
	// its policy pol.dirs[i].
	dirs [2]edir
	pol  policy
	// mask is what each fd is registered for.
	mask [2]uint32
	// closing: edge is ending the socket (stopCode set); closeBy bounds
	// the wait for the close frames to go out.
	closing bool
	closeBy int64
	done    bool
}

// edir is one direction of an esock.
type edir struct {
	src int // index in fds of the source; the destination is 1-src
	// pend holds bytes read but not yet written: at most one read plus a
	// close frame. While it is not empty the source is not read.
	pend []byte
	// eof: the source sent FIN.
	eof bool
}

func side(i int) int32 {
	if i == 0 {
		return sideClient
	}
	return sidePod
}

// register puts a new socket on the loop: the early bytes (sent right
// behind either handshake) are scanned and queued first.
func (l *eloop) register(e *esock) {
	e.pol.init(l.p.cfg(), l.p.metrics, l.now)
	if e.fds[1] < 0 {
		l.teardown(e, 0)
		return
	}
	for i := range e.dirs {
		d := &e.dirs[i]
		if len(d.pend) == 0 {
			d.pend = nil
			continue
		}
		if v := e.pol.dirs[i].relayed(e.s, d.pend); v.code != 0 {
			e.s.markStop(v.code, v.reason)
		}
	}
	for i, fd := range e.fds {
		e.mask[i] = e.want(i)
		l.socks[int32(fd)] = e
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: e.mask[i], Fd: int32(fd)}); err != nil {
			l.p.Log.Warn("epoll relay: cannot watch a media socket", "err", err, "call_sid", e.s.callID)
			l.teardown(e, 0)
			return
		}
	}
	if e.s.stopCode.Load() != 0 {
		l.beginClose(e)
		return
	}
	for i := range e.dirs {
		if e.dirs[i].pend != nil && !l.flush(e, &e.dirs[i]) {
			return
		}
	}
}

// want is the epoll interest of fds[i]: readable while its direction may
// read, writable while bytes wait for it.
func (e *esock) want(i int) uint32 {
	var m uint32
	if d := &e.dirs[i]; !d.eof && d.pend == nil && !e.closing {
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
		if m := e.want(i); m != e.mask[i] {
			e.mask[i] = m
			unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: m, Fd: int32(fd)})
		}
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
	if ev&(unix.EPOLLERR|unix.EPOLLHUP) != 0 && e.mask[i]&unix.EPOLLIN == 0 && !e.done {
		// Both ways of this connection are shut or it failed, and nothing
		// is left to read from it: level-triggered epoll would report it
		// forever.
		l.teardown(e, side(i))
	}
}

// read moves one read of d's source to its destination; false when the
// socket ended.
func (l *eloop) read(e *esock, d *edir) bool {
	n, errno := rawRead(e.fds[d.src], l.buf)
	switch {
	case again(errno):
		return true
	case errno != 0:
		l.teardown(e, side(d.src))
		return false
	case n == 0:
		return l.eof(e, d)
	}
	b := l.buf[:n]
	if d.src == 0 {
		e.pol.clientSent(l.now)
	}
	v := e.pol.dirs[d.src].relayed(e.s, b)
	w, errno := rawWrite(e.fds[1-d.src], b)
	if errno != 0 && !again(errno) {
		l.teardown(e, side(1-d.src))
		return false
	}
	if w < n {
		// The destination is full: keep the rest, stop reading the source
		// until it is out (backpressure through TCP, nothing queues).
		d.pend = append(make([]byte, 0, n-w), b[w:]...)
		l.update(e)
	}
	if v.code != 0 && e.s.markStop(v.code, v.reason) {
		l.beginClose(e)
		return !e.done
	}
	return true
}

// eof: d's source sent FIN. A WebSocket peer that ends its TCP stream is
// done (RFC 6455 7.1.1: the TCP close follows the close handshake, or
// replaces it on a failure), so the socket ends as with an edge close:
// what was read goes out first, then both connections close.
func (l *eloop) eof(e *esock, d *edir) bool {
	d.eof = true
	e.s.ended(side(d.src))
	if !e.closing {
		e.closing = true
		e.closeBy = l.now + int64(closeGrace)
	}
	if e.dirs[0].pend == nil && e.dirs[1].pend == nil {
		l.teardown(e, 0)
		return false
	}
	l.update(e)
	return true
}

// flush writes d's pending bytes; false when the socket ended.
func (l *eloop) flush(e *esock, d *edir) bool {
	w, errno := rawWrite(e.fds[1-d.src], d.pend)
	if errno != 0 && !again(errno) {
		l.teardown(e, side(1-d.src))
		return false
	}
	if d.pend = d.pend[w:]; len(d.pend) > 0 {
		return true
	}
	d.pend = nil
	if e.closing && e.dirs[0].pend == nil && e.dirs[1].pend == nil {
		l.teardown(e, 0)
		return false
	}
	l.update(e)
	return true
}

// beginClose ends the socket for edge's stopCode: the policy's close frame
// into each direction that may take one, then the TCP close once they are
// written, or after closeGrace.
func (l *eloop) beginClose(e *esock) {
	if e.done {
		return
	}
	if e.closing {
		// Ending already (a side's FIN): no close frame after it.
		return
	}
	e.closing = true
	e.closeBy = l.now + int64(closeGrace)
	for i := range e.dirs {
		d := &e.dirs[i]
		if d.eof {
			continue
		}
		if f := e.pol.dirs[i].closeFrame(e.s); f != nil {
			d.pend = append(d.pend, f...)
		}
	}
	for i := range e.dirs {
		if e.dirs[i].pend != nil && !l.flush(e, &e.dirs[i]) {
			return
		}
	}
	if e.dirs[0].pend == nil && e.dirs[1].pend == nil {
		l.teardown(e, 0)
		return
	}
	l.update(e)
}

// teardown closes both connections and hands the socket's end (metrics,
// release, which waits on Redis) to a goroutine of its own, off the loop.
// by is the side whose failure ended it (0: none or edge).
func (l *eloop) teardown(e *esock, by int32) {
	if e.done {
		return
	}
	e.done = true
	if by != 0 {
		e.s.ended(by)
	}
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
	go l.p.finish(e.s, e.pol.dirs[0].bytes, e.pol.dirs[1].bytes)
}
