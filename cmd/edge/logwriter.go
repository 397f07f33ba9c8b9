package main

import (
	"io"
	"sync"
	"time"
)

// maxPendingLog bounds the bytes a logWriter holds: past it, a line waits
// for the writer goroutine (back-pressure, never a dropped line).
const maxPendingLog = 1 << 20

// logBatchDelay is the longest a line waits for others to leave with it.
const logBatchDelay = 2 * time.Millisecond

// logWriter takes edge's stderr off the request path: Write appends the
// line to a buffer and one goroutine writes the buffer out, so that under
// load many lines leave in one write system call instead of one each.
//
// Why: every answered call logs two lines (allocated, released), and a
// write to stderr (a pipe to the container runtime) is a system call that
// also wakes the reader. At 16 clients that cost 25-40 us of edge's
// 260 us of CPU per allocate+release cycle (docs/benchmarks.md, issue 12).
//
// Lines keep their order. What is given up: lines accepted in the
// microseconds before a crash (a panic, SIGKILL) may not reach stderr;
// Close writes everything on a clean stop, and lines written after Close
// go straight out.
type logWriter struct {
	out  io.Writer
	wake chan struct{} // one pending wake-up at most
	stop chan struct{}
	done chan struct{}

	// outMu orders the writes to out: whoever takes lines from pending
	// holds it until they are written, so that two batches never cross.
	outMu sync.Mutex

	mu      sync.Mutex
	room    *sync.Cond // pending was written out
	pending []byte
	closed  bool
}

func newLogWriter(out io.Writer) *logWriter {
	w := &logWriter{out: out, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	w.room = sync.NewCond(&w.mu)
	go w.run()
	return w
}

// Write accepts p (slog's handlers do not keep p after Write returns, and
// neither does anyone else: it is copied).
func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	for !w.closed && len(w.pending) > 0 && len(w.pending)+len(p) > maxPendingLog {
		w.room.Wait()
	}
	if w.closed {
		w.mu.Unlock()
		return w.writeThrough(p)
	}
	w.pending = append(w.pending, p...)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is pending already; it will take p too
	}
	return len(p), nil
}

// writeThrough writes what is pending, then p, in order with any batch the
// goroutine is writing.
func (w *logWriter) writeThrough(p []byte) (int, error) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.mu.Lock()
	rest := w.pending
	w.pending = nil
	w.mu.Unlock()
	if len(rest) > 0 {
		w.out.Write(rest)
	}
	if len(p) == 0 {
		return 0, nil
	}
	return w.out.Write(p)
}

func (w *logWriter) run() {
	defer close(w.done)
	var spare []byte
	delay := time.NewTimer(logBatchDelay)
	delay.Stop()
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			return
		}
		// Let the lines of the next moment join this one's: without the
		// wait, the goroutine wakes for nearly every line and the wake-up
		// costs what the write did.
		delay.Reset(logBatchDelay)
		select {
		case <-delay.C:
		case <-w.stop:
			return
		}
		w.outMu.Lock()
		w.mu.Lock()
		lines := w.pending
		w.pending = spare[:0]
		w.mu.Unlock()
		// A write error has nowhere to go: stderr is where errors go.
		w.out.Write(lines)
		w.outMu.Unlock()
		// Keep the buffer for the next batch unless a burst grew it large.
		spare = nil
		if cap(lines) <= 64<<10 {
			spare = lines
		}
		w.mu.Lock()
		w.room.Broadcast()
		w.mu.Unlock()
	}
}

// Close writes out what is pending and makes later writes synchronous.
func (w *logWriter) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.room.Broadcast() // a writer waiting for room writes through now
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	_, err := w.writeThrough(nil)
	return err
}
