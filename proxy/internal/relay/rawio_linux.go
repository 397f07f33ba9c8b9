//go:build linux

package relay

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// RawRead and RawWrite are read(2) and write(2) on non-blocking fds
// without the runtime's syscall bookkeeping (entersyscall, a sysmon wake-up
// and the P hand-off check): they never block, so none is needed. Every
// relay uses them; that bookkeeping per message was a visible part of the
// goroutine relay's profile (docs/bench-media.md).
func RawRead(fd int, b []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}

func RawWrite(fd int, b []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), 0
}
