package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// lockedBuffer is an io.Writer that records every Write call.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Every line written before Close is out after it, each writer's lines in
// its order, none torn; lines written after Close go straight out.
func TestLogWriterKeepsEveryLineInOrder(t *testing.T) {
	out := &lockedBuffer{}
	w := newLogWriter(out)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(w, "g%d line %d\n", g, i)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w, "after close\n")

	next := make([]int, writers)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines+1 || got[len(got)-1] != "after close" {
		t.Fatalf("%d lines out, want %d ending with the one after Close (last: %q)", len(got), writers*lines+1, got[len(got)-1])
	}
	for _, l := range got[:len(got)-1] {
		var g, i int
		if _, err := fmt.Sscanf(l, "g%d line %d", &g, &i); err != nil || g >= writers || i != next[g] {
			t.Fatalf("line %q out of order or torn (want g%d line %d)", l, g, next[min(g, writers-1)])
		}
		next[g]++
	}
	// The point of it: fewer writes than lines when lines come together.
	t.Logf("%d lines in %d writes", writers*lines+1, out.writes)
}

// A writer past maxPendingLog waits for room instead of dropping its
// line, and Close frees a writer that waits.
func TestLogWriterHoldsBackWhenFull(t *testing.T) {
	// synctest.Wait returns once every goroutine is blocked: the third
	// write has had every chance to get through, and must not have.
	synctest.Test(t, func(t *testing.T) {
		out := &blockingWriter{release: make(chan struct{}), first: make(chan struct{})}
		w := newLogWriter(out)
		w.Write([]byte("first\n")) // the goroutine takes it and blocks in out
		<-out.first
		w.Write(bytes.Repeat([]byte("x"), maxPendingLog)) // fills pending
		written := make(chan struct{})
		go func() {
			w.Write([]byte("waits\n"))
			close(written)
		}()
		synctest.Wait()
		select {
		case <-written:
			t.Fatal("a write past the bound did not wait")
		default:
		}
		close(out.release)
		<-written
		w.Close()
		if got := out.buf.String(); !strings.HasPrefix(got, "first\n") || !strings.HasSuffix(got, "waits\n") || len(got) != len("first\n")+maxPendingLog+len("waits\n") {
			t.Fatalf("%d bytes out, want every line", len(got))
		}
	})
}

// blockingWriter blocks its first Write until release is closed.
type blockingWriter struct {
	once    sync.Once
	first   chan struct{}
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.once.Do(func() {
		close(b.first)
		<-b.release
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}
