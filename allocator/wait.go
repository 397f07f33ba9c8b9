package allocator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Waiting for capacity (admission.wait, docs/admission.md).
//
// A call whose chain is all busy is queued in Redis by allocate.lua itself
// (no extra round trip) and its goroutine sleeps here. The hand-off is
// Redis-side: the script that frees room (a release on any replica, a
// sweep, an allocate, a poll) gives it to the waiters in order
// (lua/lib/waits.lua's serve_waiters) and publishes their call ids; the Waker of
// the replica where each one waits wakes it, and its allocate picks the
// pod up. Each replica also polls its waiters every PollInterval, for
// room that appears without a script that serves waiters and for a lost
// message.

// errWaiting is allocate.lua's "wait" reply inside the allocator.
var errWaiting = errors.New("waiting for capacity")

// Wait results (the edge_admission_wait_seconds label).
const (
	waitServed  = "served"
	waitTimeout = "timeout"
	waitGaveUp  = "gave_up"
	waitError   = "error"
)

// answerMargin is kept between the end of a wait and the caller's own
// deadline, so that the caller still gets the capacity answer (a provider
// its failure markup), not its own timeout.
const answerMargin = 250 * time.Millisecond

// minWait: a budget shorter than this is not worth a queue entry.
const minWait = 50 * time.Millisecond

// selfPoll is how often a wait asks again when no Waker runs any more.
const selfPoll = 250 * time.Millisecond

// waiter is one waiting Allocate; wake holds at most one pending wake-up.
type waiter struct{ wake chan struct{} }

// waitRegistry is the calls waiting on this replica, by call id (a
// duplicate webhook of a waiting call waits beside it).
type waitRegistry struct {
	mu sync.Mutex
	m  map[string][]*waiter
	n  int
}

// add registers a waiter for callID, or returns nil when max wait already.
func (r *waitRegistry) add(callID string, max int) *waiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n >= max {
		return nil
	}
	w := &waiter{wake: make(chan struct{}, 1)}
	r.m[callID] = append(r.m[callID], w)
	r.n++
	return w
}

func (r *waitRegistry) remove(callID string, w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.m[callID]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			r.n--
			break
		}
	}
	if len(ws) == 0 {
		delete(r.m, callID)
	} else {
		r.m[callID] = ws
	}
}

// wake tells every waiter of callID to ask again.
func (r *waitRegistry) wake(callID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.m[callID] {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// wakeAll tells every waiter to ask again.
func (r *waitRegistry) wakeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ws := range r.m {
		for _, w := range ws {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

// ids lists the waiting call ids.
func (r *waitRegistry) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.m))
	for id := range r.m {
		out = append(out, id)
	}
	return out
}

// waitBudget is how long this allocation may wait: the configured budget,
// cut to end answerMargin before ctx's deadline; 0 when waiting is off or
// no Waker runs.
func (a *Allocator) waitBudget(ctx context.Context, s *settings) time.Duration {
	b := s.cfg.Admission.Wait.Budget
	if b <= 0 || a.wakers.Load() == 0 {
		return 0
	}
	if dl, ok := ctx.Deadline(); ok {
		b = min(b, time.Until(dl)-answerMargin)
	}
	if b < minWait {
		return 0
	}
	return b
}

// allocateWaiting is Allocate for a call that may wait up to budget.
func (a *Allocator) allocateWaiting(ctx context.Context, req Request, s *settings, w *waiter, budget time.Duration) (Allocation, error) {
	start := time.Now()
	end := start.Add(budget)
	timer := time.NewTimer(budget)
	defer timer.Stop()
	waited := false
	var chain []string
	for {
		al, deadline, err := a.allocateOnce(ctx, req, s, max(time.Until(end), 0), &chain)
		switch {
		case err != nil && ctx.Err() != nil:
			// The request may have queued the call before ctx ended.
			return a.giveUp(ctx, req, start, waited)
		case err != nil:
			if waited {
				result := waitError
				if errors.Is(err, ErrNoCapacity) {
					result = waitTimeout
					a.metrics.waitTimeouts.Inc()
				}
				a.metrics.waitSeconds.WithLabelValues(result).Observe(time.Since(start).Seconds())
			}
			return al, err
		case deadline.IsZero():
			if waited {
				al.Waited = time.Since(start)
				a.metrics.waitSeconds.WithLabelValues(waitServed).Observe(al.Waited.Seconds())
			}
			return al, nil
		}
		waited = true
		// Without a Waker (edge is stopping: its Run ended) this wait
		// asks again by itself, as the Waker's poll would.
		var poll <-chan time.Time
		if a.wakers.Load() == 0 {
			poll = time.After(selfPoll)
		}
		select {
		case <-w.wake:
		case <-poll:
		case <-timer.C:
			return a.waitTimedOut(ctx, req, s, start, al.Warning, chain)
		case <-ctx.Done():
			return a.giveUp(ctx, req, start, waited)
		}
	}
}

// waitTimedOut ends a wait whose budget ran out: refused at_capacity, or
// the pod a script gave it just now.
func (a *Allocator) waitTimedOut(ctx context.Context, req Request, s *settings, start time.Time, warning string, chain []string) (Allocation, error) {
	how, err := a.unwait(ctx, req.CallID, req.Creator, false)
	if err != nil {
		a.metrics.waitSeconds.WithLabelValues(waitError).Observe(time.Since(start).Seconds())
		return Allocation{}, err
	}
	if how == waitServed {
		al, _, err := a.allocateOnce(ctx, req, s, 0, nil)
		if err != nil && ctx.Err() != nil {
			return a.giveUp(ctx, req, start, true)
		}
		result := waitServed
		if err != nil {
			result = waitError
		}
		al.Waited = time.Since(start)
		a.metrics.waitSeconds.WithLabelValues(result).Observe(al.Waited.Seconds())
		return al, err
	}
	a.metrics.allocations.WithLabelValues("", string(ReasonAtCapacity)).Inc()
	a.metrics.waitTimeouts.Inc()
	a.metrics.waitSeconds.WithLabelValues(waitTimeout).Observe(time.Since(start).Seconds())
	return Allocation{Warning: warning}, &NoCapacityError{Reason: ReasonAtCapacity, Chain: chain}
}

// giveUp ends the wait of a caller that went away: its ticket goes, and a
// pod a script gave it in the meantime goes back at once (released, so
// the call is over: a later webhook of it gets a hangup).
func (a *Allocator) giveUp(ctx context.Context, req Request, start time.Time, waited bool) (Allocation, error) {
	callID := req.CallID
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	how, err := a.unwait(cctx, callID, req.Creator, true)
	if err == nil && how == waitServed {
		_, err = a.Release(cctx, callID)
	}
	if waited {
		a.metrics.waitSeconds.WithLabelValues(waitGaveUp).Observe(time.Since(start).Seconds())
	}
	cause := context.Cause(ctx)
	if err != nil {
		return Allocation{}, fmt.Errorf("allocate %s: caller gave up waiting for capacity (%w), and ending its wait failed: %w", callID, cause, err)
	}
	return Allocation{}, fmt.Errorf("allocate %s: caller gave up waiting for capacity: %w", callID, cause)
}

// unwait runs unwait.lua for the call's creator: "waiting" (dequeued),
// "served" or "gone".
func (a *Allocator) unwait(ctx context.Context, callID, creator string, gaveUp bool) (string, error) {
	flag := "0"
	if gaveUp {
		flag = "1"
	}
	r, err := a.run(ctx, "unwait", []string{a.keys.WaitDeadline()}, callID, flag, creator)
	if err != nil {
		return "", fmt.Errorf("end wait of %s: %w", callID, err)
	}
	return reply(r).str(0), nil
}

// waiterCount is how many calls wait for capacity on every replica (their
// deadline not yet passed), read from Redis: edge_admission_waiters.
func (a *Allocator) waiterCount(ctx context.Context) (int64, error) {
	n, err := a.rdb.ZCount(ctx, a.keys.WaitDeadline(), strconv.FormatInt(time.Now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("count waiters: %w", unavailable(err))
	}
	return n, nil
}

// Waker wakes the calls waiting for capacity on this replica: it listens
// on K.WaitWake for the calls scripts served and polls every PollInterval
// (wait_poll.lua). Waiting is on only while a Waker runs.
type Waker struct {
	a *Allocator
	// PollInterval is how often waiters are looked at without a message.
	// Default 250ms.
	PollInterval time.Duration
	started      chan struct{}
}

// Waker returns a Waker of a's waiters, to be run once per process.
func (a *Allocator) Waker() *Waker {
	return &Waker{a: a, PollInterval: 250 * time.Millisecond, started: make(chan struct{})}
}

// Started is closed once Run listens (or failed to subscribe and relies on
// polls): calls may wait from then on.
func (w *Waker) Started() <-chan struct{} { return w.started }

// Run listens and polls until ctx ends. go-redis resubscribes after a
// lost connection; polls cover the gap.
func (w *Waker) Run(ctx context.Context) error {
	sub := w.a.rdb.Subscribe(ctx, w.a.keys.WaitWake())
	defer sub.Close()
	// The subscription's confirmation: a wake published from here on
	// reaches this replica. Without Redis now, polls stand in.
	_, _ = sub.Receive(ctx)
	w.a.wakers.Add(1)
	defer func() {
		// The calls still waiting (edge is stopping) ask again now and
		// then by themselves, so a pod given to one is answered at once.
		w.a.wakers.Add(-1)
		w.a.waits.wakeAll()
	}()
	close(w.started)
	msgs := sub.Channel()
	tick := time.NewTicker(w.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			for _, id := range strings.Fields(m.Payload) {
				w.a.waits.wake(id)
			}
		case <-tick.C:
			w.poll(ctx)
		}
	}
}

// poll serves what room there is and wakes the local waiters that got a
// pod or left the queue.
func (w *Waker) poll(ctx context.Context) {
	ids := w.a.waits.ids()
	if len(ids) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	r, err := w.a.run(pctx, "wait_poll", []string{w.a.keys.WaitDeadline()}, args...)
	if err != nil {
		return // counted in edge_redis_script_errors_total; the next tick retries
	}
	rep := reply(r)
	for i, id := range ids {
		if st := rep.str(i + 1); st != "waiting" {
			w.a.waits.wake(id)
		}
	}
}
