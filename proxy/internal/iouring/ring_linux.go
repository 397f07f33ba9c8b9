//go:build linux

package iouring

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A minimal io_uring: one submission and one completion ring shared with
// the kernel, driven by raw io_uring_enter(2) calls. x/sys/unix has the
// syscall numbers only, so the kernel's ABI
// (include/uapi/linux/io_uring.h) is spelt out here. One goroutine owns a
// ring.

// uringParams is struct io_uring_params.
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQOffsets
	cqOff                                                                  uringCQOffsets
}

type uringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// SQE is struct io_uring_sqe (64 bytes), with the union members a relay
// uses.
type SQE struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	opFlags  uint32 // msg_flags, poll32_events, cancel_flags
	userData uint64
	bufIndex uint16
	_        uint16
	_        int32
	addr3    uint64
	_        uint64
}

// CQE is struct io_uring_cqe (without the big-CQE extension): the
// UserData of its SQE, the result (a count, or -errno) and flags.
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Buffer is the provided buffer the completion filled, if it names one.
func (c CQE) Buffer() (bid uint16, ok bool) {
	return uint16(c.Flags >> 16), c.Flags&cqeFBuffer != 0
}

const (
	opPollAdd     = 6
	opAsyncCancel = 14
	opSend        = 26
	opRecv        = 27

	sqeIOLink = 1 << 2 // IOSQE_IO_LINK: the next SQE starts once this one succeeded

	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	setupClamp     = 1 << 4 // IORING_SETUP_CLAMP
	setupSubmitAll = 1 << 7 // IORING_SETUP_SUBMIT_ALL

	// SetupDeferTaskrun: completions' kernel work (the recv itself, once
	// its poll fired) runs only when the one submitter thread asks for
	// events, in a batch, instead of interrupting whichever thread
	// submitted (IORING_SETUP_SINGLE_ISSUER|IORING_SETUP_DEFER_TASKRUN,
	// Linux 6.1).
	SetupDeferTaskrun = 1<<12 | 1<<13

	enterExtArg = 1 << 3 // IORING_ENTER_EXT_ARG

	featSingleMmap = 1 << 0  // IORING_FEAT_SINGLE_MMAP
	featNoDrop     = 1 << 1  // IORING_FEAT_NODROP
	featMinTimeout = 1 << 15 // IORING_FEAT_MIN_TIMEOUT: min_wait_usec (6.12)

	// recvPollFirst (IORING_RECVSEND_POLL_FIRST, in ioprio): arm the poll
	// without trying the recv first, for a recv re-armed right after the
	// previous one drained the socket.
	recvPollFirst = 1 << 0

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// Ring is one io_uring instance.
type Ring struct {
	fd int
	// The shared memory: the rings (one mapping with SINGLE_MMAP) and the
	// SQE array.
	ringMem, sqeMem []byte

	sqHead, sqTail *uint32
	sqMask         uint32
	sqEntries      uint32
	sqes           []SQE
	// sqLocal is the tail of SQEs prepared but not yet published.
	sqLocal uint32

	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           []CQE

	// minWait: the kernel takes a wait's min_wait_usec.
	minWait bool
}

// New sets up a ring of at least entries submission slots (the kernel
// rounds up to a power of two; completions get twice as many), with more
// setup flags (SetupDeferTaskrun: the calling thread, locked, must be the
// ring's only submitter).
func New(entries, flags uint32) (*Ring, error) {
	var p uringParams
	p.flags = setupClamp | setupSubmitAll | flags
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd), minWait: p.features&featMinTimeout != 0}
	if p.features&featSingleMmap == 0 || p.features&featNoDrop == 0 {
		unix.Close(r.fd)
		return nil, errors.New("io_uring: kernel too old (needs SINGLE_MMAP and NODROP, Linux 5.5+)")
	}
	sqSize := uintptr(p.sqOff.array) + uintptr(p.sqEntries)*4
	cqSize := uintptr(p.cqOff.cqes) + uintptr(p.cqEntries)*unsafe.Sizeof(CQE{})
	size := max(sqSize, cqSize)
	mem, err := unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Close(r.fd)
		return nil, fmt.Errorf("io_uring: mmap rings: %w", err)
	}
	r.ringMem = mem
	sqeMem, err := unix.Mmap(r.fd, offSQEs, int(uintptr(p.sqEntries)*unsafe.Sizeof(SQE{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Munmap(mem)
		unix.Close(r.fd)
		return nil, fmt.Errorf("io_uring: mmap sqes: %w", err)
	}
	r.sqeMem = sqeMem
	base := unsafe.Pointer(&mem[0])
	at := func(off uint32) unsafe.Pointer { return unsafe.Add(base, off) }
	r.sqHead = (*uint32)(at(p.sqOff.head))
	r.sqTail = (*uint32)(at(p.sqOff.tail))
	r.sqMask = *(*uint32)(at(p.sqOff.ringMask))
	r.sqEntries = *(*uint32)(at(p.sqOff.ringEntries))
	r.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&sqeMem[0])), p.sqEntries)
	// The indirection array maps ring slot i to SQE i, once for all.
	array := unsafe.Slice((*uint32)(at(p.sqOff.array)), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqLocal = atomic.LoadUint32(r.sqTail)
	r.cqHead = (*uint32)(at(p.cqOff.head))
	r.cqTail = (*uint32)(at(p.cqOff.tail))
	r.cqMask = *(*uint32)(at(p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*CQE)(at(p.cqOff.cqes)), p.cqEntries)
	return r, nil
}

// Probe reports why this process cannot run a ring as a relay loop makes
// it (nil: it can): SetupDeferTaskrun and a buffer ring, on one thread
// (SINGLE_ISSUER ties both calls to it). A kernel too old, or a seccomp
// profile refusing io_uring, fails it.
func Probe() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := New(8, SetupDeferTaskrun)
	if err != nil {
		return err
	}
	b, err := r.NewBufRing(2, 2, 64, 2)
	r.Close()
	if err != nil {
		return err
	}
	b.Close()
	return nil
}

// Close unmaps the rings and closes the ring, which cancels what is still
// in flight.
func (r *Ring) Close() {
	unix.Munmap(r.sqeMem)
	unix.Munmap(r.ringMem)
	unix.Close(r.fd)
}

// MinWait reports whether the kernel takes a wait's minimum (SubmitWait's
// minWait; Linux 6.12).
func (r *Ring) MinWait() bool { return r.minWait }

// Room reports whether n more SQEs fit without a submit in between.
func (r *Ring) Room(n uint32) bool { return r.sqLocal+n-atomic.LoadUint32(r.sqHead) <= r.sqEntries }

// Get returns a zeroed SQE to fill, or nil when the submission ring is
// full (submit first).
func (r *Ring) Get() *SQE {
	if r.sqLocal-atomic.LoadUint32(r.sqHead) >= r.sqEntries {
		return nil
	}
	s := &r.sqes[r.sqLocal&r.sqMask]
	*s = SQE{}
	r.sqLocal++
	return s
}

// Pending is how many SQEs were prepared since the last submit.
func (r *Ring) Pending() uint32 { return r.sqLocal - atomic.LoadUint32(r.sqTail) }

// Enter publishes the prepared SQEs and makes one io_uring_enter: it
// submits them and, with wait > 0, waits for that many completions. raw
// skips the runtime's syscall bookkeeping: only for calls that do not
// block (wait 0).
func (r *Ring) Enter(wait uint32, raw bool) (int, error) {
	atomic.StoreUint32(r.sqTail, r.sqLocal)
	n := r.sqLocal - atomic.LoadUint32(r.sqHead)
	var flags uintptr
	if wait > 0 {
		flags = enterGetEvents
	}
	if n == 0 && wait == 0 {
		return 0, nil
	}
	call := unix.Syscall6
	if raw {
		call = unix.RawSyscall6
	}
	got, _, errno := call(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), uintptr(wait), flags, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("io_uring_enter: %w", errno)
	}
	return int(got), nil
}

// getEventsArg is struct io_uring_getevents_arg.
type getEventsArg struct {
	sigmask              uint64
	sigmaskSz, minWaitUs uint32
	ts                   uint64
}

// SubmitWait submits what was prepared and blocks until a completion
// arrives or timeout passes (timeout <= 0: none).
//
// With minWait > 0 it waits for up to want completions for at most
// minWait, and past that returns with any (IORING_FEAT_MIN_TIMEOUT): a
// batch traded for that much latency.
//
// The wait is a raw syscall: the thread keeps its P, and the runtime sees
// no syscall (no hand-off of the P, no sysmon wake-ups); a preemption
// signal (GC, sysmon) interrupts it with EINTR. Only a loop on a locked
// thread of its own may call it.
func (r *Ring) SubmitWait(timeout, minWait time.Duration, want uint32) error {
	atomic.StoreUint32(r.sqTail, r.sqLocal)
	n := r.sqLocal - atomic.LoadUint32(r.sqHead)
	var ts unix.Timespec
	arg := getEventsArg{minWaitUs: uint32(minWait / time.Microsecond)}
	if arg.minWaitUs == 0 {
		want = 1
	}
	if timeout > 0 {
		ts = unix.NsecToTimespec(int64(timeout))
		arg.ts = uint64(uintptr(unsafe.Pointer(&ts)))
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), uintptr(want),
		enterGetEvents|enterExtArg, uintptr(unsafe.Pointer(&arg)), unsafe.Sizeof(arg))
	if errno != 0 && errno != unix.ETIME && errno != unix.EINTR && errno != unix.EBUSY {
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
	return nil
}

// Ready reports whether completions wait to be read.
func (r *Ring) Ready() bool { return atomic.LoadUint32(r.cqTail) != *r.cqHead }

// Reap calls f on every completion available now, then hands their slots
// back to the kernel; it returns how many there were.
func (r *Ring) Reap(f func(c CQE)) int {
	head := *r.cqHead
	tail := atomic.LoadUint32(r.cqTail)
	for h := head; h != tail; h++ {
		f(r.cqes[h&r.cqMask])
	}
	atomic.StoreUint32(r.cqHead, tail)
	return int(tail - head)
}

// The SQE shapes a relay uses.

// Recv receives into b.
func (s *SQE) Recv(fd int, b []byte, ud uint64) {
	s.opcode, s.fd, s.userData = opRecv, int32(fd), ud
	s.addr, s.len = uint64(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b))
}

// Send writes all of b (MSG_WAITALL: a short write is retried by the
// kernel, so a completion short of len(b) is a failure).
func (s *SQE) Send(fd int, b []byte, ud uint64) {
	s.opcode, s.fd, s.userData = opSend, int32(fd), ud
	s.addr, s.len = uint64(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b))
	s.opFlags = unix.MSG_WAITALL | unix.MSG_NOSIGNAL
}

// Cancel asks the kernel to cancel the operation whose user_data is target
// (IORING_OP_ASYNC_CANCEL): it completes with -ECANCELED unless it
// completed first. The cancel's own completion carries ud.
func (s *SQE) Cancel(target, ud uint64) {
	s.opcode, s.fd, s.userData = opAsyncCancel, -1, ud
	s.addr = target
}

// PollIn waits for fd to be readable.
func (s *SQE) PollIn(fd int, ud uint64) {
	s.opcode, s.fd, s.userData = opPollAdd, int32(fd), ud
	s.opFlags = unix.POLLIN
}

// BufRing is a provided-buffer ring (IORING_REGISTER_PBUF_RING, Linux
// 5.19): buffers the kernel picks from when a recv completes, so that a
// recv waiting in the kernel holds none. Entries are struct io_uring_buf
// (addr, len, bid, resv); the ring's tail is the resv field of entry 0.
//
// The kernel takes buffers in ring order, so a ring holding every buffer
// would make all of them resident in turn. Instead the ring is kept
// topped up with only enough buffers for the next batch (ahead), taken
// from a free list that reuses the most recently returned first: the
// buffers in use stay few and warm, and the rest of the (mmap'ed,
// outside Go's heap) space is never touched unless the load needs it.
type BufRing struct {
	entries []uringBuf // shared with the kernel
	mem     []byte     // their mapping
	bufs    []byte     // the buffers, size bytes each (mmap'ed)
	size    int
	mask    uint16
	// tail is the next entry to fill; bid0 mirrors entries[0].bid, which
	// shares a 32-bit word with the published tail.
	tail, bid0 uint16
	// free holds the buffers neither in the ring nor in use, the last
	// returned on top; ahead counts those put in the ring whose use the
	// loop has not seen yet (at least the kernel's count of free ones).
	free  []uint16
	ahead int
}

// uringBuf is struct io_uring_buf.
type uringBuf struct {
	addr uint64
	len  uint32
	bid  uint16
	resv uint16
}

// NoBufs is a RecvSelect's result when the buffer ring was empty
// (-ENOBUFS).
const NoBufs = -105

const (
	registerPbufRing = 22      // IORING_REGISTER_PBUF_RING
	sqeBufferSelect  = 1 << 5  // IOSQE_BUFFER_SELECT
	cqeFBuffer       = 1 << 0  // IORING_CQE_F_BUFFER: the high 16 bits are the bid
	uringBufGroup    = 0       // the loop's one buffer group
	pageSize         = 4 << 10 // the ring's mapping is page-aligned
)

// NewBufRing registers a ring of n entries (a power of two) as buffer
// group uringBufGroup, over total buffers of size bytes, and puts
// ahead of them in it.
func (r *Ring) NewBufRing(n, total, size, ahead int) (*BufRing, error) {
	ringBytes := (n*int(unsafe.Sizeof(uringBuf{})) + pageSize - 1) &^ (pageSize - 1)
	mem, err := unix.Mmap(-1, 0, ringBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("io_uring: mmap buffer ring: %w", err)
	}
	bufs, err := unix.Mmap(-1, 0, total*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("io_uring: mmap buffers: %w", err)
	}
	b := &BufRing{mem: mem, bufs: bufs, size: size, mask: uint16(n - 1),
		entries: unsafe.Slice((*uringBuf)(unsafe.Pointer(&mem[0])), n), free: make([]uint16, total)}
	for i := range b.free {
		b.free[i] = uint16(total - 1 - i) // buffer 0 on top
	}
	reg := struct {
		ringAddr    uint64
		ringEntries uint32
		bgid, flags uint16
		resv        [3]uint64
	}{ringAddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), ringEntries: uint32(n), bgid: uringBufGroup}
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerPbufRing,
		uintptr(unsafe.Pointer(&reg)), 1, 0, 0); errno != 0 {
		b.Close()
		return nil, fmt.Errorf("io_uring: register buffer ring: %w", errno)
	}
	b.TopUp(ahead)
	return b, nil
}

// Buf is buffer bid, res bytes long.
func (b *BufRing) Buf(bid uint16, res int) []byte {
	off := int(bid) * b.size
	return b.bufs[off : off+res : off+b.size]
}

// Taken notes that the kernel used one of the ring's buffers (a
// completion named it).
func (b *BufRing) Taken() { b.ahead-- }

// Put returns buffer bid to the free list.
func (b *BufRing) Put(bid uint16) { b.free = append(b.free, bid) }

// TopUp puts free buffers in the ring until ahead of them are unused
// there (at most the ring's size), and publishes them.
func (b *BufRing) TopUp(ahead int) {
	ahead = min(ahead, len(b.entries))
	if b.ahead >= ahead || len(b.free) == 0 {
		return
	}
	for b.ahead < ahead && len(b.free) > 0 {
		bid := b.free[len(b.free)-1]
		b.free = b.free[:len(b.free)-1]
		// The slot is free: the kernel holds fewer than len(entries)
		// unused entries (b.ahead counts at least those).
		e := &b.entries[b.tail&b.mask]
		e.addr = uint64(uintptr(unsafe.Pointer(&b.bufs[int(bid)*b.size])))
		e.len = uint32(b.size)
		if b.tail&b.mask == 0 {
			b.bid0 = bid // written with the tail, below
		} else {
			e.bid = bid
		}
		b.tail++
		b.ahead++
	}
	// One atomic store of the word holding entry 0's bid and the tail
	// orders it after the entries' writes.
	w := [2]uint16{b.bid0, b.tail} // as the two fields lie in memory
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b.entries[0].bid)), *(*uint32)(unsafe.Pointer(&w)))
}

// Close unmaps the ring and the buffers: only once the io_uring it was
// registered with has nothing in flight, or is closed.
func (b *BufRing) Close() {
	unix.Munmap(b.mem)
	unix.Munmap(b.bufs)
}

// RecvSelect receives into a buffer of the ring (group uringBufGroup).
func (s *SQE) RecvSelect(fd, size int, ud uint64) {
	s.opcode, s.fd, s.userData = opRecv, int32(fd), ud
	s.len = uint32(size)
	s.flags |= sqeBufferSelect
	s.bufIndex = uringBufGroup
}

// Link makes the next SQE start only once this one succeeded
// (IOSQE_IO_LINK); both must go in one submission (Room).
func (s *SQE) Link() { s.flags |= sqeIOLink }

// PollFirst arms a Recv's poll without trying the receive first
// (IORING_RECVSEND_POLL_FIRST), for a receive re-armed right after the
// previous one drained the socket.
func (s *SQE) PollFirst() { s.ioprio = recvPollFirst }
