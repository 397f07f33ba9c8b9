//go:build linux

package loop

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// inbox carries commands (a socket to add, a socket to end) from any
// goroutine to one event loop, waking the loop through an eventfd it
// waits on. Both relays' loops have one.
type inbox[C any] struct {
	wakeFd int // eventfd: commands are queued
	done   chan struct{}

	mu      sync.Mutex
	queue   []C
	stopped bool
	queued  atomic.Bool
}

// open makes the eventfd; the loop's run closes done when it ends.
func (b *inbox[C]) open() error {
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return err
	}
	b.wakeFd, b.done = wfd, make(chan struct{})
	return nil
}

// send queues c for the loop; false once the loop stopped.
func (b *inbox[C]) send(c C) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	b.queue = append(b.queue, c)
	if !b.queued.Swap(true) {
		// Under mu: the loop closes wakeFd under mu once stopped, so a
		// late send never writes to a reused fd number.
		b.wake()
	}
	return true
}

func (b *inbox[C]) wake() {
	one := [8]byte{1}
	unix.Write(b.wakeFd, one[:])
}

// quit stops the loop and waits for it (its run closes done).
func (b *inbox[C]) quit() {
	b.mu.Lock()
	b.stopped = true
	b.queued.Store(true)
	b.wake()
	b.mu.Unlock()
	<-b.done
}

// take is the loop's side: the commands queued since the last take, and
// whether the loop must stop.
func (b *inbox[C]) take() ([]C, bool) {
	if !b.queued.Load() {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queued.Store(false)
	q := b.queue
	b.queue = nil
	return q, b.stopped
}

// closeWake closes the eventfd once the loop stopped.
func (b *inbox[C]) closeWake() {
	b.mu.Lock()
	unix.Close(b.wakeFd)
	b.mu.Unlock()
}
