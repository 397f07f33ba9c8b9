//go:build linux

package iouring

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newRing is a plain ring of at least entries submission slots.
func newRing(entries uint32) (*Ring, error) { return New(entries, 0) }

func TestRingLayout(t *testing.T) {
	if s := unsafe.Sizeof(SQE{}); s != 64 {
		t.Fatalf("sqe is %d bytes, the kernel's is 64", s)
	}
	if s := unsafe.Sizeof(CQE{}); s != 16 {
		t.Fatalf("CQE is %d bytes, the kernel's is 16", s)
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
	defer r.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])

	// A recv first, with nothing to read yet: it must wait in the kernel,
	// not fail with EAGAIN on the non-blocking socket.
	in := make([]byte, 64)
	r.Get().Recv(fds[1], in, 1)
	if _, err := r.Enter(0, false); err != nil {
		t.Fatal(err)
	}
	if r.Ready() {
		t.Fatal("a recv on an empty socket completed")
	}
	msg := []byte("hello through io_uring")
	s := r.Get()
	s.Send(fds[0], msg, 2)
	s.Link()
	echo := make([]byte, 64)
	r.Get().Recv(fds[0], echo, 3) // nothing comes back: stays pending
	if _, err := r.Enter(2, false); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]int32{}
	r.Reap(func(c CQE) { got[c.UserData] = c.Res })
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
	if _, err := r.Enter(1, false); err != nil {
		t.Fatal(err)
	}
	r.Reap(func(c CQE) { got[c.UserData] = c.Res })
	if res, ok := got[3]; !ok || res != 0 {
		t.Fatalf("recv after the peer's shutdown: %d %v, want 0", res, ok)
	}
}

// TestBufRing receives into buffers the kernel picks from a provided-buffer
// ring: each completion names its buffer, an empty ring fails the recv
// with ENOBUFS, and a buffer put back serves the next one.
func TestBufRing(t *testing.T) {
	r, err := New(8, 0)
	if err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	defer r.Close()
	b, err := r.NewBufRing(2, 3, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])

	recvOne := func(msg string) CQE {
		t.Helper()
		if _, err := unix.Write(fds[0], []byte(msg)); err != nil {
			t.Fatal(err)
		}
		r.Get().RecvSelect(fds[1], 64, 7)
		if _, err := r.Enter(1, false); err != nil {
			t.Fatal(err)
		}
		var got []CQE
		r.Reap(func(c CQE) { got = append(got, c) })
		if len(got) != 1 {
			t.Fatalf("%d completions, want 1", len(got))
		}
		return got[0]
	}
	seen := map[uint16]bool{}
	for _, msg := range []string{"first", "second"} {
		c := recvOne(msg)
		if c.Flags&cqeFBuffer == 0 || c.Res != int32(len(msg)) {
			t.Fatalf("recv %q: res %d flags %#x, want a buffer", msg, c.Res, c.Flags)
		}
		bid := uint16(c.Flags >> 16)
		if got := string(b.Buf(bid, int(c.Res))); got != msg || seen[bid] {
			t.Fatalf("buffer %d holds %q (seen before: %v), want %q", bid, got, seen[bid], msg)
		}
		seen[bid] = true
	}
	// Two of the three buffers were put ahead, and both are taken.
	b.Taken()
	b.Taken()
	c := recvOne("third")
	if c.Res != NoBufs {
		t.Fatalf("recv with the ring empty: res %d, want -ENOBUFS", c.Res)
	}
	// Returned buffers go back in last-returned-first order; buffer 2,
	// never needed, stays untouched.
	for bid := range seen {
		b.Put(bid)
	}
	order := []uint16{b.free[2], b.free[1]}
	b.TopUp(2)
	for _, want := range order {
		c = recvOne("") // "third" (then "fourth") is waiting in the socket
		if c.Flags&cqeFBuffer == 0 || uint16(c.Flags>>16) != want {
			t.Fatalf("recv after the buffers came back: res %d flags %#x, want buffer %d", c.Res, c.Flags, want)
		}
		b.Taken()
		if _, err := unix.Write(fds[0], []byte("fourth")); err != nil {
			t.Fatal(err)
		}
	}
}
