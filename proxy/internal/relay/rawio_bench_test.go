//go:build linux

package relay

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkRawReadEmpty is one RawRead that finds nothing (EAGAIN on an
// empty non-blocking pipe): the price of entering and leaving the kernel
// on this machine, which every relayed message pays at least twice (its
// read and its write, docs/bench-media.md). On a paravirtualised guest it
// is microseconds, not the ~100 ns of bare metal.
//
//	go test -run '^$' -bench RawReadEmpty -count 3 ./proxy/internal/relay/
func BenchmarkRawReadEmpty(b *testing.B) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	buf := make([]byte, 512)
	for b.Loop() {
		if _, errno := RawRead(fds[0], buf); errno != unix.EAGAIN {
			b.Fatalf("read an empty pipe: %v", errno)
		}
	}
}
