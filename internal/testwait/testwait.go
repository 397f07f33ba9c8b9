// Package testwait waits, in tests, for a condition that no event
// announces: state in Redis, another process, a metric. A test that can
// await an event (a channel, a read) awaits it instead.
package testwait

import (
	"testing"
	"time"
)

// Until polls cond until it holds, and fails tb (Fatal) once timeout has
// passed without it; what names the condition in the failure. The polls
// start 1 ms apart and back off to 50 ms, so a condition that holds soon
// is seen soon and a long wait does not spin.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(pause)
	}
}
