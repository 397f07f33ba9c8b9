//go:build linux

package loop

import (
	"testing"
	"time"
)

// The window gathers about batchTarget completions at the last tick's
// rate, up to the configured bound, and is none where the bound would not
// gather a quarter of them.
func TestBatchWindowFollowsTheLoad(t *testing.T) {
	const tick = 50 * time.Millisecond
	for _, c := range []struct {
		name     string
		n        int // completions in the tick
		maxBatch time.Duration
		want     time.Duration
	}{
		{"off", 100000, 0, 0},
		{"idle", 0, 300 * time.Microsecond, 0},
		// 10 streams: 2,000 completions a second, 0.6 in 300 us.
		{"light load: no window", 100, 300 * time.Microsecond, 0},
		// 35 streams: 4.2 expected in 300 us, over a quarter of the target.
		{"moderate load: the bound", 700, 300 * time.Microsecond, 300 * time.Microsecond},
		// 200 streams: 40,000 a second, 16 in 400 us.
		{"200 streams", 2000, time.Millisecond, 400 * time.Microsecond},
		{"1000 streams", 10000, time.Millisecond, 80 * time.Microsecond},
		{"5000 streams", 50000, time.Millisecond, 16 * time.Microsecond},
	} {
		if got := batchWindow(c.n, tick, c.maxBatch); got != c.want {
			t.Errorf("%s: batchWindow(%d in %v, bound %v) = %v, want %v", c.name, c.n, tick, c.maxBatch, got, c.want)
		}
	}
}
