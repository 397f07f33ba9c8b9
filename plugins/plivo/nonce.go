package plivo

import (
	"sync"
	"time"
)

// Replay protection. A V3 signature has no expiry: a captured signed
// webhook verifies for as long as the auth token lives. Plivo sends a
// fresh random nonce with every request, so a nonce seen again is a replay
// and is refused. The set is bounded in size and in time, in memory, per
// plugin process: one edge replica does not see another's nonces. A
// replay that lands on another replica, or after the window, is caught by
// edge's call tombstones (an ended call stays ended, allocator) and, for a
// live call, gets the same pod (allocation is idempotent per call id).

// Defaults of the seen-nonce set.
const (
	DefaultNonceWindow = 15 * time.Minute
	DefaultNonceCap    = 100_000
)

// nonceSet remembers nonces for window, at most max of them (the oldest
// forgotten first). Its memory is bounded by max times the nonce size, and
// edge bounds header sizes.
type nonceSet struct {
	mu     sync.Mutex
	window time.Duration
	max    int
	now    func() time.Time
	seen   map[string]time.Time
	order  []nonceEntry // insertion order: a FIFO for expiry and eviction
	head   int
}

type nonceEntry struct {
	nonce string
	at    time.Time
}

func newNonceSet(window time.Duration, max int, now func() time.Time) *nonceSet {
	return &nonceSet{window: window, max: max, now: now, seen: map[string]time.Time{}}
}

// firstUse records nonce and reports whether it was unseen in the window.
func (s *nonceSet) firstUse(nonce string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.expire(now)
	if at, ok := s.seen[nonce]; ok && now.Sub(at) < s.window {
		return false
	}
	for len(s.seen) >= s.max {
		s.evictOldest()
	}
	s.seen[nonce] = now
	s.order = append(s.order, nonceEntry{nonce, now})
	return true
}

func (s *nonceSet) expire(now time.Time) {
	for s.head < len(s.order) && now.Sub(s.order[s.head].at) >= s.window {
		s.evictOldest()
	}
}

func (s *nonceSet) evictOldest() {
	e := s.order[s.head]
	s.order[s.head] = nonceEntry{}
	s.head++
	if at, ok := s.seen[e.nonce]; ok && at.Equal(e.at) {
		delete(s.seen, e.nonce)
	}
	// Compact once the dead prefix is half the slice, so the FIFO's memory
	// follows the live entries.
	if s.head > len(s.order)/2 {
		s.order = append(s.order[:0:0], s.order[s.head:]...)
		s.head = 0
	}
}

// len is the number of remembered nonces (tests).
func (s *nonceSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}
