package allocator

import (
	"context"
	"fmt"
)

// Released is the outcome of a release.
type Released struct {
	PodName string
	// ReleasedToPool: the pod is free for a new call (exclusive) or has one
	// more free slot (shared).
	ReleasedToPool bool
	// SourcePool is the call's source_pool ("pool:gold", "merchant:acme"),
	// the pool a released pod went back to.
	SourcePool  string
	WasDraining bool
	// Stale: the call info was left over but its pod had already been
	// recovered (its lease ran out); nothing was returned to any pool.
	Stale bool
	// MerchantID and Creator are the call's (its call info's merchant_id
	// and creator: "provider:<name>", "token:<name>", "" for the
	// predecessor's), for the release's log line.
	MerchantID, Creator string
}

// Release ends the call's allocation in one round trip. It is fenced and
// happens once: it frees only what the call still holds, and a second release
// of the same call returns ErrCallNotFound and changes nothing. The call
// leaves a tombstone for the call info TTL: a later Allocate of it returns
// ErrCallEnded. Its media claim (MediaLeases.Claim) ends with it.
func (a *Allocator) Release(ctx context.Context, callID string) (Released, error) {
	a.tracked.untrack(callID)
	return a.release(ctx, callID, recordArgs(ReleasedByAPI, nil), "", "")
}

// releaseSocketEnd is Release by the end of the call's media socket: the
// tombstone keeps the socket's close and counters (the call's timeline).
// A socket's end that finds no call (Redis lost it) still marks the call
// ended, so that no replica writes it back.
func (a *Allocator) releaseSocketEnd(ctx context.Context, callID string, end SocketEnd) (Released, error) {
	// The socket is over whatever the release answers: nothing of the
	// call is this replica's to write back any more.
	a.tracked.untrack(callID)
	return a.release(ctx, callID, recordArgs(ReleasedBySocket, &end), "", "")
}

// release runs release.lua with the tombstone's record fields (recordArgs)
// and, when creator is not "", only for a call of that creator and, when
// the call was stored with an account, of that account.
func (a *Allocator) release(ctx context.Context, callID string, record []any, creator, account string) (Released, error) {
	if err := ValidateID("call_sid", callID); err != nil {
		return Released{}, err
	}
	s := a.current.Load()
	args := []any{callID, s.cfg.CallInfoTTL.Milliseconds(), s.cfg.EndedTTL.Milliseconds(), s.poolTypes}
	args = append(args, record...)
	args = append(args, creator, account)
	keys := []string{a.keys.Call(callID), a.keys.CallEnded(callID), a.keys.EndedMarksOf(callID)}
	r, err := a.run(ctx, "release", keys, args...)
	if err != nil {
		a.metrics.releases.WithLabelValues("", "error").Inc()
		return Released{}, fmt.Errorf("release %s: %w", callID, err)
	}
	rep := reply(r)
	switch outcome := rep.str(0); outcome {
	case "socket_open":
		// Nothing was released (EndByProvider): not counted as a release.
		return Released{}, fmt.Errorf("release %s: %w", callID, errSocketOpen)
	case "unwaited":
		// A waiting call's wait ended (EndByProvider): it held no pod.
		return Released{}, fmt.Errorf("release %s: %w", callID, errUnwaited)
	case "not_found":
		a.metrics.releases.WithLabelValues("", outcome).Inc()
		return Released{}, fmt.Errorf("release %s: %w", callID, ErrCallNotFound)
	case "other_account":
		// Nothing was released (EndByProvider): not counted as a release.
		return Released{}, fmt.Errorf("release %s: %w", callID, ErrOtherAccount)
	case "stale":
		a.metrics.releases.WithLabelValues(rep.str(2), outcome).Inc()
		return Released{PodName: rep.str(1), Stale: true, SourcePool: rep.str(2), MerchantID: rep.str(3), Creator: rep.str(4)}, nil
	case "released":
		a.metrics.releases.WithLabelValues(rep.str(4), outcome).Inc()
		return Released{PodName: rep.str(1), ReleasedToPool: rep.int(2) == 1, WasDraining: rep.int(3) == 1, SourcePool: rep.str(4),
			MerchantID: rep.str(5), Creator: rep.str(6)}, nil
	case "wrongtype":
		a.metrics.releases.WithLabelValues("", "error").Inc()
		return Released{}, fmt.Errorf("release %s: %s holds a %s, which neither edge nor the predecessor writes there; nothing was changed", callID, rep.str(1), rep.str(2))
	default:
		a.metrics.releases.WithLabelValues("", "error").Inc()
		return Released{}, fmt.Errorf("release %s: unexpected script reply %v", callID, r)
	}
}
