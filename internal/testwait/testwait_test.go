package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilSeesTheConditionHold(t *testing.T) {
	var n atomic.Int32
	Until(t, 5*time.Second, "the third poll", func() bool { return n.Add(1) >= 3 })
	if got := n.Load(); got != 3 {
		t.Errorf("polled %d times, want 3", got)
	}
}

// recorder is a testing.TB that records a Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func TestUntilFailsAtTheTimeout(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("Until returned (or panicked with %v) for a condition that never holds", p)
			}
		}()
		Until(r, 30*time.Millisecond, "never", func() bool { return false })
	}()
	if waited := time.Since(start); waited < 30*time.Millisecond || waited > 2*time.Second || r.failed == "" {
		t.Errorf("failed %q after %v, want a failure after about 30ms", r.failed, waited)
	}
}
