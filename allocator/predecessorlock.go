package allocator

import (
	"context"
	"errors"
	"time"
)

// The predecessor's idempotency lock (seeds 003, step 2): before it picks a
// pod for a call, the predecessor writes the call's info as {_lock: 1} with
// a 30 s TTL, then stores its allocation over it some round trips later.
// allocate.lua answers "locked" for such a call and writes nothing; the
// call asks again until the predecessor's allocation appears (answered as
// existing, as the predecessor answers a duplicate of a call it holds) or
// the lock goes (allocated then as any new call), for at most
// PredecessorLockWait. Allocating over the lock gave a call sent to both
// routers at once two pods.

// PredecessorLockWait bounds how long an allocate waits for the predecessor
// to finish an allocation of the same call that it holds the lock of. Its
// allocation takes 9 to 14 Redis round trips, milliseconds; a lock still
// there after this long is the leftover of one that failed (it stays 30 s).
const PredecessorLockWait = 2 * time.Second

// predecessorLockPoll is how often the call asks again: the predecessor
// announces nothing, so its allocation can only be looked for.
const predecessorLockPoll = 10 * time.Millisecond

// errPredecessorLock is allocate.lua's "locked" reply inside the allocator.
var errPredecessorLock = errors.New("the predecessor holds the call's lock")

// predecessorLockEnd is when a wait for the predecessor's lock that starts
// now gives up: after PredecessorLockWait, or answerMargin before ctx's
// deadline, so that the caller still gets an answer.
func predecessorLockEnd(ctx context.Context) time.Time {
	end := time.Now().Add(PredecessorLockWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-answerMargin).Before(end) {
		end = d.Add(-answerMargin)
	}
	return end
}

// waitPredecessorLock waits one poll interval, false when the wait is over
// (end passed or ctx ended).
func waitPredecessorLock(ctx context.Context, end time.Time) bool {
	wait := min(predecessorLockPoll, time.Until(end))
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
