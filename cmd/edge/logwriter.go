package main

import (
	"io"
	"sync"
	"time"
)

// maxPendingLog bounds the bytes a logWriter holds: past it, a line waits
// for the next flush (back-pressure, never a dropped line).
const maxPendingLog = 1 << 20

// logBatchDelay is the longest a line waits for others to leave with it.
const logBatchDelay = 2 * time.Millisecond

// logWriter takes edge's stderr off the request path: Write appends the
// line to a buffer and arms a timer; when it fires, one goroutine writes
// everything buffered, so that under load many lines leave in one write
// system call instead of one each.
//
// Why: every answered call logs two lines (allocated, released), and a
// write to stderr (a pipe to the container runtime) is a system call, made
// under slog's lock. At 16 clients logging was 10 % of edge's CPU per
// allocate+release cycle, 4 % with this writer (docs/benchmarks.md).
// A timer, not a goroutine woken per line: arming one wakes
// nobody, and a wake-up per line cost about what the write did.
//
// Lines keep their order. What is given up: lines accepted in the last
// logBatchDelay before a crash (a panic, SIGKILL) may not reach stderr;
// Close writes everything on a clean stop, and lines written after Close
// go straight out.
type logWriter struct {
	out   io.Writer
	timer *time.Timer // runs flush

	// outMu orders flush and the writes after Close.
	outMu sync.Mutex

	mu      sync.Mutex
	room    *sync.Cond // a flush made room in pending
	pending []byte
	spare   []byte // the buffer of the last batch, for the next one
	// armed: the timer will flush pending. It stays set while a flush
	// writes, so that one flush runs at a time.
	armed  bool
	closed bool
}

func newLogWriter(out io.Writer) *logWriter {
	w := &logWriter{out: out}
	w.room = sync.NewCond(&w.mu)
	w.timer = time.AfterFunc(time.Hour, w.flush)
	w.timer.Stop()
	return w
}

// Write accepts p (copied: slog reuses its buffer).
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
	if !w.armed {
		w.armed = true
		w.timer.Reset(logBatchDelay)
	}
	w.mu.Unlock()
	return len(p), nil
}

// flush writes what is pending, and arms the timer again if lines came
// meanwhile.
func (w *logWriter) flush() {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.mu.Lock()
	lines := w.pending
	w.pending = w.spare[:0]
	w.spare = nil
	w.mu.Unlock()
	if len(lines) > 0 {
		// A write error has nowhere to go: stderr is where errors go.
		w.out.Write(lines)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if cap(lines) <= 64<<10 { // keep the buffer unless a burst grew it
		w.spare = lines
	}
	w.armed = len(w.pending) > 0 && !w.closed
	if w.armed {
		w.timer.Reset(logBatchDelay)
	}
	w.room.Broadcast()
}

// writeThrough writes what is pending, then p, in order with a flush that
// is writing.
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
	w.timer.Stop()
	_, err := w.writeThrough(nil)
	return err
}
