package allocator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Redis is a cache of truth the replicas can rebuild: when it loses its
// data (restarted without persistence, flushed), each replica still relays
// the media of its live calls and knows them. The data set's epoch
// (Keys.Epoch) tells a replica that this happened; it then writes its calls
// back (renew.lua) while allocate.lua offers no pod (Keys.Recovering), so a
// busy exclusive pod is never given to a second call.

// ErrRecovering: Redis lost its data moments ago and the replicas are
// re-asserting their live calls; no pod is offered until they have. It
// wraps ErrUnavailable: for a webhook it is edge that cannot serve, not a
// refusal of the call.
var ErrRecovering = fmt.Errorf("%w: redis lost its data; replicas are re-asserting their calls", ErrUnavailable)

// recoveringError carries how long allocate.lua asked to wait.
type recoveringError struct{ wait time.Duration }

func (e *recoveringError) Error() string {
	return fmt.Sprintf("%v (ask again in %s)", ErrRecovering, e.wait)
}
func (e *recoveringError) Unwrap() error { return ErrRecovering }

// trackedCall is what this replica knows of a call whose media socket it
// holds, or that it answered and whose socket has not come yet (holder ""
// until then): enough to write the call back if Redis loses it, so that a
// provider's socket arriving after the loss still finds its call.
type trackedCall struct {
	pod, holder, replica            string
	source, kind, merchant, creator string
	account                         string // the provider account, "" for none
	// pendingUntil is when an answered call whose socket never came stops
	// being this replica's to write back (its lease would have run out);
	// zero once a socket holds it.
	pendingUntil time.Time
}

// tracker holds the calls whose sockets this replica admitted (claimMediaOn)
// until their socket's release, and the calls it answered until their
// socket comes.
type tracker struct {
	mu      sync.Mutex
	calls   map[string]trackedCall
	pruned  time.Time // the last pass that dropped expired pending calls
	epoch   string    // the data set epoch this replica knows ("" none yet)
	replica string    // the name this replica claims sockets under
	loss    dataLoss  // seen by renewals, not yet reported by a heartbeat
}

func (t *tracker) track(callID string, c trackedCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.trackLocked(callID, c)
}

func (t *tracker) trackLocked(callID string, c trackedCall) {
	if t.calls == nil {
		t.calls = map[string]trackedCall{}
	}
	t.calls[callID] = c
	if c.replica != "" {
		t.replica = c.replica
	}
	// Answered calls whose socket went to another replica, or never came,
	// are dropped once their lease would have run out; one pass a second
	// bounds the cost.
	if now := time.Now(); now.Sub(t.pruned) > time.Second {
		t.pruned = now
		for id, x := range t.calls {
			if !x.pendingUntil.IsZero() && now.After(x.pendingUntil) {
				delete(t.calls, id)
			}
		}
	}
}

// answered records a call this replica allocated, until its socket comes
// (track with a holder replaces it) or its lease would have run out. A
// call already held by a socket here keeps its entry: the check and the
// write are one step, so a socket claimed in between is never forgotten.
func (t *tracker) answered(callID string, c trackedCall, lease time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls[callID].holder != "" {
		return
	}
	c.pendingUntil = time.Now().Add(lease)
	t.trackLocked(callID, c)
}

// SetReplica names this replica on the calls it answers (answered_by), so
// that the leader ends them should it die before their sockets come.
func (a *Allocator) SetReplica(name string) {
	a.tracked.mu.Lock()
	defer a.tracked.mu.Unlock()
	a.tracked.replica = name
}

func (t *tracker) replicaName() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.replica
}

func (t *tracker) untrack(callID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.calls, callID)
}

// moved records a call's move to another pod. What re-asserting it would
// need (its new pool) is not known here, so it can no longer be written
// back: after Redis loses its data its socket is closed, as before
// re-assertion existed.
func (t *tracker) moved(callID, pod string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.calls[callID]; ok {
		c.pod, c.kind = pod, ""
		t.calls[callID] = c
	}
}

func (t *tracker) get(callID string) (trackedCall, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.calls[callID]
	return c, ok
}

func (t *tracker) all() []Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Lease, 0, len(t.calls))
	for id, c := range t.calls {
		out = append(out, Lease{CallID: id, PodName: c.pod, Holder: c.holder})
	}
	return out
}

// answeredBatch bounds the answered calls one heartbeat asks about.
const answeredBatch = 500

// unclaimed lists the answered calls whose socket this replica has not
// seen, at most answeredBatch of them.
func (t *tracker) unclaimed() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for id, c := range t.calls {
		if c.holder == "" {
			out = append(out, id)
			if len(out) == answeredBatch {
				break
			}
		}
	}
	return out
}

// settle forgets answered calls whose socket another replica admitted, or
// that ended, unless a socket here claimed one meanwhile.
func (t *tracker) settle(ids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if c, ok := t.calls[id]; ok && c.holder == "" {
			delete(t.calls, id)
		}
	}
}

func (t *tracker) knownEpoch() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.epoch
}

// adopt takes epoch as known, unless another one was adopted since the
// caller read was (a concurrent renewal got there first).
func (t *tracker) adopt(was, epoch string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.epoch == was {
		t.epoch = epoch
	}
}

// lost records that a renewal found Redis emptied (the epoch changed from
// was) and wrote back what it could, then adopts the new epoch. The next
// Heartbeat reports it, whichever path saw it first.
func (t *tracker) lost(was, epoch string, back, gone int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.loss.seen = true
	t.loss.back += back
	t.loss.gone += gone
	if t.epoch == was {
		t.epoch = epoch
	}
}

// takeLoss returns and clears what lost recorded.
func (t *tracker) takeLoss() dataLoss {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.loss
	t.loss = dataLoss{}
	return l
}

// dataLoss is what renewals saw of Redis losing its data since the last
// heartbeat: whether they did, and the calls written back or not.
type dataLoss struct {
	seen       bool
	back, gone int
}

// trackedCalls is how many calls this replica would write back if Redis lost
// its data now.
func (a *Allocator) trackedCalls() int {
	a.tracked.mu.Lock()
	defer a.tracked.mu.Unlock()
	return len(a.tracked.calls)
}

// Beat is what one heartbeat found.
type Beat struct {
	// DataLost reports that Redis lost its data since the last beat (the
	// epoch changed), so that the caller restores what else lived only in
	// Redis (tier and merchant config); Reasserted counts the calls written
	// back then, Lost those that could not be (their pod serves another
	// call, or they ended meanwhile).
	DataLost         bool
	Reasserted, Lost int
	// Stale are the replicas whose beat is older than ReplicaTTL, by
	// Redis' clock: candidates for EndDeadReplicas, which asks Redis
	// whether they still hold a connection.
	Stale []string
}

// Heartbeat is one replica's presence beat (presence.lua): it records that
// replica is alive (Keys.Replicas, for the dead-replica check), reads the
// data set's epoch and lists the replicas whose beat is stale, in one
// round trip. When Redis lost its data since the last beat (the epoch
// changed), it first writes back every call whose socket this replica
// holds, then takes the new epoch as known.
func (a *Allocator) Heartbeat(ctx context.Context, replica string) (Beat, error) {
	known := a.tracked.knownEpoch()
	s := a.current.Load()
	args := []any{replica, known, randomEpoch(), s.cfg.RecoveryHold.Milliseconds(), s.cfg.ReplicaTTL.Milliseconds(),
		s.cfg.EndedTTL.Milliseconds(), a.endedLayout.next(s.cfg.EndedTTL), a.endedLayout.pruneFrom()}
	// The calls answered here whose socket has not come here: those whose
	// socket another replica admitted, or that ended, are forgotten, so
	// that a loss of Redis data never writes back a call that is over.
	for _, id := range a.tracked.unclaimed() {
		args = append(args, id)
	}
	r, err := a.run(ctx, "presence", []string{a.keys.Replicas()}, args...)
	if err != nil {
		return Beat{}, fmt.Errorf("heartbeat of %s: %w", replica, err)
	}
	a.endedLayout.beat()
	rep := reply(r)
	epoch, rest := rep.str(0), rep.strs(2)
	settled := min(int(rep.int(1)), len(rest))
	a.tracked.settle(rest[:settled])
	stale := rest[settled:]
	if known == "" || epoch == known {
		a.tracked.adopt(known, epoch)
	} else {
		// Redis lost its data since the last beat or renewal: write back
		// every call whose socket this replica holds (with no socket,
		// Renew runs no script: there is nothing to write back).
		leases := a.tracked.all()
		if _, err := a.Renew(ctx, leases); err != nil {
			return Beat{DataLost: true, Stale: stale}, fmt.Errorf("re-assert %d calls after redis lost its data: %w", len(leases), err)
		}
		a.tracked.lost(known, epoch, 0, 0)
	}
	// A renewal may have seen it first and written the calls back.
	loss := a.tracked.takeLoss()
	return Beat{DataLost: loss.seen, Reasserted: loss.back, Lost: loss.gone, Stale: stale}, nil
}

// randomEpoch is the random part of a new epoch; allocate.lua, renew.lua
// and presence.lua prefix it with Redis' clock when they store one.
func randomEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// waitRecovery sleeps for the wait allocate.lua asked for, bounded by ctx
// and by deadline; false when there is no time left to ask again.
func waitRecovery(ctx context.Context, err error, deadline time.Time) bool {
	var re *recoveringError
	if !errors.As(err, &re) {
		return false
	}
	wait := min(re.wait, time.Until(deadline))
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
