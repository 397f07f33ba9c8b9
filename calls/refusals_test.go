package calls

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// recordSink keeps log records and signals each one.
type recordSink struct {
	mu      sync.Mutex
	records []slog.Record
	got     chan struct{}
}

func (s *recordSink) Enabled(context.Context, slog.Level) bool { return true }
func (s *recordSink) WithAttrs([]slog.Attr) slog.Handler       { return s }
func (s *recordSink) WithGroup(string) slog.Handler            { return s }
func (s *recordSink) Handle(_ context.Context, r slog.Record) error {
	s.mu.Lock()
	s.records = append(s.records, r)
	s.mu.Unlock()
	s.got <- struct{}{}
	return nil
}

// A burst of refusals is two lines, not one per refusal (997 WARNs for
// one burst before).
func TestRefusalsAreAggregated(t *testing.T) {
	sink := &recordSink{got: make(chan struct{}, 10)}
	// An interval longer than the test, and the flush called here: with
	// 20 ms, 1,000 notes under the race detector on a loaded machine spanned
	// two intervals and the counts split between two lines.
	r := newRefusalLog(slog.New(sink), time.Hour)
	for range 600 {
		r.note("at_capacity", "call_sid", "CA1")
	}
	for range 400 {
		r.note("no_pods")
	}
	<-sink.got // the first refusal, at once
	r.flush()  // the end of the interval
	<-sink.got
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.records) != 2 {
		t.Fatalf("%d log lines for 1000 refusals, want 2", len(sink.records))
	}
	counts := map[string]int64{}
	sink.records[1].Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() == slog.KindInt64 {
			counts[a.Key] = a.Value.Int64()
		}
		return true
	})
	if counts["at_capacity"] != 599 || counts["no_pods"] != 400 {
		t.Fatalf("aggregated counts %v, want at_capacity 599, no_pods 400", counts)
	}
}

func TestShortID(t *testing.T) {
	long := string(make([]byte, 10<<10))
	if got := shortID(long); len(got) > 70 {
		t.Fatalf("a 10 KB id logs as %d bytes", len(got))
	}
	if shortID("CA1") != "CA1" {
		t.Fatal("a short id changed")
	}
}

// The counts are logged by the interval's timer, without another refusal.
func TestRefusalCountsAreFlushedByTheTimer(t *testing.T) {
	sink := &recordSink{got: make(chan struct{}, 1000)}
	r := newRefusalLog(slog.New(sink), 5*time.Millisecond)
	deadline := time.After(10 * time.Second)
	for {
		r.note("no_pods") // logged whole or counted, as the timer left it
		select {
		case <-deadline:
			t.Fatal("no aggregated line within 10 s")
		case <-sink.got:
		}
		sink.mu.Lock()
		last := sink.records[len(sink.records)-1].Message
		sink.mu.Unlock()
		if last == "allocations refused (aggregated)" {
			return
		}
	}
}
