package proxy

import (
	"sync"
	"time"
)

// moveBudget is a token bucket of mid-call moves per merchant, on this
// replica: size moves, refilled evenly over a minute. A merchant's calls
// whose stream kills every agent it reaches would otherwise cost a pod per
// move, call after call. Merchant ids come from signed webhooks or
// authenticated callers, and the map is bounded all the same.
type moveBudget struct {
	now func() time.Time
	mu  sync.Mutex
	// buckets are the merchants whose bucket is not full.
	buckets map[string]moveBucket
}

type moveBucket struct {
	tokens float64
	at     time.Time
}

// maxMoveBuckets bounds the merchants tracked at once; past it the
// fullest buckets (those nearly refilled) are forgotten, which only
// forgives what they owed.
const maxMoveBuckets = 10000

func newMoveBudget(now func() time.Time) *moveBudget {
	return &moveBudget{now: now, buckets: map[string]moveBucket{}}
}

// take spends one of merchant's moves ("" counts as a merchant of its
// own) and reports whether one was left, size being the bucket's size.
func (b *moveBudget) take(merchant string, size int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	max := float64(size)
	bk, ok := b.buckets[merchant]
	if !ok {
		bk = moveBucket{tokens: max, at: now}
	}
	bk.tokens = min(max, bk.tokens+now.Sub(bk.at).Minutes()*max)
	bk.at = now
	if bk.tokens < 1 {
		b.buckets[merchant] = bk
		return false
	}
	bk.tokens--
	if len(b.buckets) >= maxMoveBuckets && !ok {
		b.forgetFullLocked(now, max)
	}
	b.buckets[merchant] = bk
	return true
}

// forgetFullLocked drops the buckets that have refilled (or nearly:
// never fewer than a tenth of them), so that the map stays bounded.
func (b *moveBudget) forgetFullLocked(now time.Time, max float64) {
	for m, bk := range b.buckets {
		if bk.tokens+now.Sub(bk.at).Minutes()*max >= max-1 {
			delete(b.buckets, m)
		}
	}
	for m := range b.buckets {
		if len(b.buckets) < maxMoveBuckets*9/10 {
			break
		}
		delete(b.buckets, m)
	}
}
