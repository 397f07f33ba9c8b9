package allocator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// A media socket that ends while Redis is unreachable (a pause, a failover)
// cannot release its call; a webhook whose allocation timed out may yet be
// allocated once Redis catches up, for a call edge answered "cannot serve". Left alone, the call's pod stays held until its
// lease runs out and a sweep finds it: a minute of a pod lost for every call
// that ended during a ten-second blip. So the release is retried, in order,
// until Redis answers or the lease would have run out anyway.

// releaseRetryEvery is the pause between two passes over the pending
// releases while Redis stays unreachable.
const releaseRetryEvery = 250 * time.Millisecond

// pendingRelease is one socket's release that Redis did not take.
type pendingRelease struct {
	callID string
	by     string
	end    *SocketEnd
	until  time.Time // the call's lease has run out by then: the sweep's
}

// releaseRetry holds the pending releases; one goroutine works through
// them while there are any.
type releaseRetry struct {
	mu      sync.Mutex
	pending []pendingRelease
	trying  int // taken out of pending by the pass in progress
	// queued are the calls (and who releases them) pending or being
	// tried: the same release asked again while Redis is away (a
	// provider's retries, a socket URL replayed against a replica cut off
	// from Redis) is queued once, so that no caller grows the queue.
	queued  map[string]struct{}
	running bool
	counts  *prometheus.CounterVec // result: queued, done, expired
}

func newReleaseRetry(reg prometheus.Registerer) releaseRetry {
	c := promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "edge_release_retries_total",
		Help: "Media socket releases that found Redis unreachable and were retried, by result (queued; done: Redis took it; expired: the call's lease ran out first, the sweep ends it).",
	}, []string{"result"})
	for _, r := range []string{"queued", "done", "expired"} {
		c.WithLabelValues(r)
	}
	return releaseRetry{counts: c, queued: map[string]struct{}{}}
}

// releaseLater queues a release that failed for want of Redis: a socket's
// (by ReleasedBySocket, with its end) or an unanswered webhook's.
func (a *Allocator) releaseLater(callID, by string, end *SocketEnd) {
	r := &a.retry
	r.mu.Lock()
	defer r.mu.Unlock()
	k := callID + "\x00" + by
	if _, ok := r.queued[k]; ok {
		return
	}
	r.queued[k] = struct{}{}
	until := time.Now().Add(a.current.Load().cfg.EffectiveLeaseTTL())
	r.pending = append(r.pending, pendingRelease{callID: callID, by: by, end: end, until: until})
	r.counts.WithLabelValues("queued").Inc()
	if !r.running {
		r.running = true
		go a.retryReleases()
	}
}

// retryReleases runs until no release is pending: each pass tries them in
// order and stops at the first that finds Redis still unreachable.
func (a *Allocator) retryReleases() {
	r := &a.retry
	for {
		time.Sleep(releaseRetryEvery) // Redis is down: no event to wait for
		r.mu.Lock()
		todo := r.pending
		r.pending, r.trying = nil, len(todo)
		r.mu.Unlock()

		var left, finished []pendingRelease
		for i, p := range todo {
			if time.Now().After(p.until) {
				r.counts.WithLabelValues("expired").Inc()
				finished = append(finished, p)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := a.release(ctx, p.callID, recordArgs(p.by, p.end), "", "")
			cancel()
			if errors.Is(err, ErrUnavailable) {
				left = append(left, todo[i:]...)
				break
			}
			// Released, stale or gone: either way nothing is held for it.
			r.counts.WithLabelValues("done").Inc()
			finished = append(finished, p)
		}

		r.mu.Lock()
		for _, p := range finished {
			delete(r.queued, p.callID+"\x00"+p.by)
		}
		r.pending, r.trying = append(left, r.pending...), 0
		if len(r.pending) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
	}
}
