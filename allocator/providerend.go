package allocator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// errSocketOpen is release.lua's "socket_open": a provider's end of a call
// whose media socket is open released nothing (EndByProvider).
var errSocketOpen = errors.New("the call's media socket is open")

// errUnwaited is release.lua's "unwaited": a provider's end of a call that
// was still waiting for capacity ended its wait (EndByProvider).
var errUnwaited = errors.New("the call was waiting for capacity")

// ProviderEnd is what a provider's end of a call did.
type ProviderEnd struct {
	// Released is the release, when no socket held the call: its pod is
	// back in its pool (or its slot free) at once.
	Released Released
	// SocketOpen: a media socket holds the call. Nothing was released: the
	// socket ends the call when the provider closes it, and, should the
	// provider never close it, at its next lease renewal (which the call
	// no longer gets). A late or replayed webhook of the call is refused
	// meanwhile.
	SocketOpen bool
	// Unwaited: the call was still waiting for capacity (admission.wait):
	// it held no pod; its wait ended, and its webhook, still waiting on
	// some replica, is woken and refused (ErrCallEnded) rather than given
	// the next free pod.
	Unwaited bool
}

// EndByProvider ends a call its provider says has ended (a status callback:
// a hangup, a stream that stopped or failed to open), in one round trip.
// Only a call created by creator ("provider:twilio") is ended: a provider's
// callback never ends another's call. A call stored with an account
// (Request.Account) is ended only when account is the same, else
// ErrOtherAccount and nothing changes: one account of a provider never
// ends another's calls; a call stored without one is ended whatever
// account asks, as before accounts. event is the provider's name for what
// happened ("completed", "stream-error"); the call's record keeps
// ended_by "provider:<event>" and provider_ended_at, from the first such
// callback only.
//
// A call still waiting for capacity (admission.wait) stops waiting, see
// ProviderEnd.Unwaited. With no socket holding the call it is released as
// Release does
// (released_by "provider"): the pod goes back to its pool, and the
// tombstone refuses a late socket or a replayed webhook. With a socket
// open, see ProviderEnd.SocketOpen. Idempotent: a duplicate, a later event,
// an unknown call or one that already ended returns ErrCallNotFound (or
// SocketOpen again) and changes nothing more.
func (a *Allocator) EndByProvider(ctx context.Context, callID, creator, account, event string) (ProviderEnd, error) {
	if err := ValidateID("event", event); err != nil {
		return ProviderEnd{}, err
	}
	if creator == "" || len(creator) > MaxCreatorLength {
		return ProviderEnd{}, fmt.Errorf("%w: a provider's end names the call's creator (at most %d bytes)", ErrInvalidID, MaxCreatorLength)
	}
	if err := validAccount(account); err != nil {
		return ProviderEnd{}, err
	}
	pairs := []any{"released_by", ReleasedByProvider, "ended_by", "provider:" + event,
		"provider_ended_at", strconv.FormatInt(time.Now().UnixMilli(), 10)}
	rel, err := a.release(ctx, callID, append([]any{len(pairs) / 2}, pairs...), creator, account)
	if errors.Is(err, errSocketOpen) {
		return ProviderEnd{SocketOpen: true}, nil
	}
	if errors.Is(err, errUnwaited) {
		return ProviderEnd{Unwaited: true}, nil
	}
	if err != nil {
		return ProviderEnd{}, err
	}
	// The call is over on this replica too (a socket it admitted and lost).
	a.tracked.untrack(callID)
	return ProviderEnd{Released: rel}, nil
}
