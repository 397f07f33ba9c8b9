package allocator

import (
	"context"
	"fmt"
	"strings"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// claimMediaTraced claims as claimMediaOn does, with no replica named, and
// also returns the traceparent the call's webhook was allocated under
// (Request.TraceParent; "" when none), read in the same round trip, for the
// media socket's span link.
func (a *Allocator) claimMediaTraced(ctx context.Context, callID, pod, holder string) (at, traceParent string, err error) {
	c, err := a.claimMediaOn(ctx, callID, pod, holder, "")
	return c.Pod, c.TraceParent, err
}

// ClaimedMedia is a claimed call: the pod it is on and what its call info
// says of it.
type ClaimedMedia = mediacontract.Claimed

// claimMediaOn admits one media socket for the call, across every replica,
// in one round trip: the call must be live on pod, and no other socket may
// hold it. holder is the socket's identity (a replica id and a per-socket
// nonce); claiming again with the same holder succeeds. It returns
// ErrCallNotFound when the call is not live on pod, ErrMediaClaimed when
// another socket holds the call, ErrInvalidID for unfit ids.
//
// The claim ends with the call (Release, the sweep, UnregisterPod); a socket
// that ends while its call lives on drops it (dropMediaClaim).
//
// replica, the socket's replica, is stamped on the call info with the
// socket's opening time the first time holder claims. It returns the pod
// the call is on: pod, or the one the call was moved to after a failed
// connect to pod (moveCall), so that the media URL the provider holds,
// signed for pod, still reaches the call; and the call's merchant, creator
// and the pods it left.
//
// Outside the package it is MediaLeases.Claim, the media proxy's one way in.
func (a *Allocator) claimMediaOn(ctx context.Context, callID, pod, holder, replica string) (ClaimedMedia, error) {
	if err := ValidateID("call_sid", callID); err != nil {
		return ClaimedMedia{}, err
	}
	if err := ValidateID("pod_name", pod); err != nil {
		return ClaimedMedia{}, err
	}
	if holder == "" {
		return ClaimedMedia{}, fmt.Errorf("%w: media claim holder is empty", ErrInvalidID)
	}
	r, err := a.run(ctx, "claim", []string{a.keys.Call(callID)}, pod, holder, replica, staleAfter(ctx))
	if err != nil {
		return ClaimedMedia{}, fmt.Errorf("claim media of %s: %w", callID, err)
	}
	rep := reply(r)
	switch rep.str(0) {
	case "claimed":
		c := ClaimedMedia{Pod: rep.str(1), TraceParent: rep.str(2), MerchantID: rep.str(3), Creator: rep.str(4),
			MovedFrom: strings.FieldsFunc(rep.str(5), func(r rune) bool { return r == '|' }), FailedHandshakes: int(rep.int(8)), SourcePool: rep.str(6)}
		// This replica relays the call now: it can write it back should
		// Redis lose its data (recovery.go).
		a.tracked.track(callID, trackedCall{pod: c.Pod, holder: holder, replica: replica,
			source: rep.str(6), kind: rep.str(7), merchant: c.MerchantID, creator: c.Creator, account: rep.str(9)})
		return c, nil
	case "not_found":
		if on := rep.str(1); on != "" {
			return ClaimedMedia{}, fmt.Errorf("claim media of %s on %s: the call is on %s: %w", callID, pod, on, ErrCallNotFound)
		}
		return ClaimedMedia{}, fmt.Errorf("claim media of %s: %w", callID, ErrCallNotFound)
	case "held":
		return ClaimedMedia{}, fmt.Errorf("claim media of %s: held by %s: %w", callID, rep.str(1), ErrMediaClaimed)
	case "stale":
		return ClaimedMedia{}, fmt.Errorf("claim media of %s: %w", callID, errStale)
	default:
		return ClaimedMedia{}, fmt.Errorf("claim media of %s: unexpected script reply %v", callID, r)
	}
}

// dropFailedMediaClaim is dropMediaClaim for a socket that reached no pod
// while its call is kept for the provider's own retry of the handshake:
// it also counts the failure in the call info (failed_handshakes), which
// claimMediaOn returns to the retry's socket on any replica.
func (a *Allocator) dropFailedMediaClaim(ctx context.Context, callID, holder string) (bool, error) {
	return a.dropMediaClaim(ctx, callID, holder, "failed")
}

// dropMediaClaim ends holder's claim on the call's media, for a socket that
// ends while its call lives on (e.g. its pod could not be dialled), so that
// a retry can be admitted on any replica. It reports whether holder held
// the claim; another holder's claim is left alone. how is "failed" for a
// socket that reached no pod (dropFailedMediaClaim), "" otherwise.
// Outside the package it is MediaLeases.Unclaim and UnclaimFailed.
func (a *Allocator) dropMediaClaim(ctx context.Context, callID, holder, how string) (bool, error) {
	if err := ValidateID("call_sid", callID); err != nil {
		return false, err
	}
	r, err := a.run(ctx, "unclaim", []string{a.keys.Call(callID)}, holder, how)
	if err != nil {
		return false, fmt.Errorf("drop media claim of %s: %w", callID, err)
	}
	if c, ok := a.tracked.get(callID); ok && c.holder == holder {
		a.tracked.untrack(callID)
	}
	return reply(r).int(0) == 1, nil
}
