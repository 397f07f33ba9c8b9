//go:build linux

package proxy

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newRing is a plain ring of at least entries submission slots.
func newRing(entries uint32) (*ring, error) { return newRingFlags(entries, 0) }

func TestRingLayout(t *testing.T) {
	if s := unsafe.Sizeof(sqe{}); s != 64 {
		t.Fatalf("sqe is %d bytes, the kernel's is 64", s)
	}
	if s := unsafe.Sizeof(cqe{}); s != 16 {
		t.Fatalf("cqe is %d bytes, the kernel's is 16", s)
	}
	if s := unsafe.Sizeof(uringBuf{}); s != 16 {
		t.Fatalf("io_uring_buf is %d bytes, the kernel's is 16", s)
	}
	if s := unsafe.Sizeof(uringParams{}); s != 120 {
		t.Fatalf("io_uring_params is %d bytes, the kernel's is 120", s)
	}
}

// TestRingSocketPair sends through one end of a socket pair and receives
// from the other with one io_uring_enter that submits both (the send
// linked before the recv) and waits for both completions.
func TestRingSocketPair(t *testing.T) {
	r, err := newRing(8)
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	defer r.close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])

	// A recv first, with nothing to read yet: it must wait in the kernel,
	// not fail with EAGAIN on the non-blocking socket.
	in := make([]byte, 64)
	r.get().recv(fds[1], in, 1)
	if _, err := r.enter(0, false); err != nil {
		t.Fatal(err)
	}
	if r.ready() {
		t.Fatal("a recv on an empty socket completed")
	}
	msg := []byte("hello through io_uring")
	s := r.get()
	s.send(fds[0], msg, 2)
	s.flags |= sqeIOLink
	echo := make([]byte, 64)
	r.get().recv(fds[0], echo, 3) // nothing comes back: stays pending
	if _, err := r.enter(2, false); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]int32{}
	r.reap(func(c cqe) { got[c.userData] = c.res })
	if got[2] != int32(len(msg)) {
		t.Fatalf("send completion %d, want %d (all: %v)", got[2], len(msg), got)
	}
	if got[1] != int32(len(msg)) || !bytes.Equal(in[:len(msg)], msg) {
		t.Fatalf("recv completion %d %q, want %q (all: %v)", got[1], in[:max(got[1], 0)], msg, got)
	}
	if _, ok := got[3]; ok {
		t.Fatalf("the linked recv completed with nothing sent: %v", got)
	}
	// Shutting the socket down ends the pending recv with 0 (EOF).
	unix.Shutdown(fds[1], unix.SHUT_WR)
	if _, err := r.enter(1, false); err != nil {
		t.Fatal(err)
	}
	r.reap(func(c cqe) { got[c.userData] = c.res })
	if res, ok := got[3]; !ok || res != 0 {
		t.Fatalf("recv after the peer's shutdown: %d %v, want 0", res, ok)
	}
}

// TestBufRing receives into buffers the kernel picks from a provided-buffer
// ring: each completion names its buffer, an empty ring fails the recv
// with ENOBUFS, and a buffer put back serves the next one.
func TestBufRing(t *testing.T) {
	r, err := newRingFlags(8, 0)
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	defer r.close()
	b, err := r.newBufRing(2, 3, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])

	recvOne := func(msg string) cqe {
		t.Helper()
		if _, err := unix.Write(fds[0], []byte(msg)); err != nil {
			t.Fatal(err)
		}
		r.get().recvSelect(fds[1], 64, 7)
		if _, err := r.enter(1, false); err != nil {
			t.Fatal(err)
		}
		var got []cqe
		r.reap(func(c cqe) { got = append(got, c) })
		if len(got) != 1 {
			t.Fatalf("%d completions, want 1", len(got))
		}
		return got[0]
	}
	seen := map[uint16]bool{}
	for _, msg := range []string{"first", "second"} {
		c := recvOne(msg)
		if c.flags&cqeFBuffer == 0 || c.res != int32(len(msg)) {
			t.Fatalf("recv %q: res %d flags %#x, want a buffer", msg, c.res, c.flags)
		}
		bid := uint16(c.flags >> 16)
		if got := string(b.buf(bid, int(c.res))); got != msg || seen[bid] {
			t.Fatalf("buffer %d holds %q (seen before: %v), want %q", bid, got, seen[bid], msg)
		}
		seen[bid] = true
	}
	// Two of the three buffers were put ahead, and both are taken.
	b.taken()
	b.taken()
	c := recvOne("third")
	if c.res != errNoBufs {
		t.Fatalf("recv with the ring empty: res %d, want -ENOBUFS", c.res)
	}
	// Returned buffers go back in last-returned-first order; buffer 2,
	// never needed, stays untouched.
	for bid := range seen {
		b.put(bid)
	}
	order := []uint16{b.free[2], b.free[1]}
	b.topUp(2)
	for _, want := range order {
		c = recvOne("") // "third" (then "fourth") is waiting in the socket
		if c.flags&cqeFBuffer == 0 || uint16(c.flags>>16) != want {
			t.Fatalf("recv after the buffers came back: res %d flags %#x, want buffer %d", c.res, c.flags, want)
		}
		b.taken()
		if _, err := unix.Write(fds[0], []byte("fourth")); err != nil {
			t.Fatal(err)
		}
	}
}
