package allocator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Outcomes callers branch on, compared with errors.Is.
var (
	// ErrNoCapacity: no pod in the call's whole chain could take it. The
	// error is a *NoCapacityError that says why.
	ErrNoCapacity = errors.New("no capacity")
	// ErrCallNotFound: no live allocation for this call id.
	ErrCallNotFound = errors.New("call not found")
	// ErrCallEnded: the call was allocated and has ended (released, found
	// dead by the sweep, or its pod unregistered) within the call info TTL:
	// a late or replayed webhook, to be answered with a hangup.
	ErrCallEnded = errors.New("call ended")
	// ErrOtherAccount: a provider's end of a call (EndByProvider) came
	// from another account of the provider than the one whose webhook
	// created the call; nothing was changed.
	ErrOtherAccount = errors.New("the call belongs to another account of its provider")
	// ErrMediaClaimed: another media socket already holds the call.
	ErrMediaClaimed = errors.New("call media already claimed")
	// ErrPodNotFound: the pod is not registered with edge.
	ErrPodNotFound = errors.New("pod not found")
	// ErrPodReplaced: another instance (address) is registered under the
	// pod's name than the one a request named.
	ErrPodReplaced = errors.New("pod replaced")
	// ErrInvalidID: an id is not safe to use in a key name.
	ErrInvalidID = errors.New("invalid id")
	// ErrInvalidConfig: a tier or merchant config does not validate.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrPodBusy: the pod has calls, so it cannot change tier now.
	ErrPodBusy = errors.New("pod busy")
	// ErrUnavailable: Redis did not answer (refused, reset, timed out); the
	// request may be retried.
	ErrUnavailable = errors.New("redis unavailable")
)

// unavailable marks connectivity failures with ErrUnavailable, keeping the
// cause. Script errors and other replies from Redis stay as they are.
func unavailable(err error) error {
	var ne net.Error
	var oe *net.OpError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ne), errors.As(err, &oe), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, redis.ErrClosed), failingOver(err):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// failingOver reports the replies of a Redis that is changing primaries
// (Sentinel failover, Cluster resharding or node loss) or stalled by a
// script: the request may be retried once the new primary is known or the
// script ended.
func failingOver(err error) bool {
	return redis.IsReadOnlyError(err) || redis.IsLoadingError(err) ||
		redis.IsMasterDownError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsNoReplicasError(err) ||
		// A long script holds Redis (past busy-reply-threshold): every
		// other command is refused with BUSY, nothing ran. Writes refused
		// while the last save failed (MISCONF) or memory is full (OOM),
		// and a full client table, last until Redis's operator acts.
		redis.HasErrorPrefix(err, "BUSY") || redis.HasErrorPrefix(err, "MISCONF") ||
		redis.HasErrorPrefix(err, "OOM") || strings.HasPrefix(err.Error(), "ERR max number of clients reached") ||
		// go-redis' failover client while no sentinel answers (it has no
		// sentinel value to compare with).
		strings.Contains(err.Error(), "all sentinels specified in configuration are unreachable")
}

// Reason tells apart the ways a chain can have no room for a call.
type Reason string

const (
	// ReasonNoPods: no pod is assigned to any pool of the chain.
	ReasonNoPods Reason = "no_pods"
	// ReasonAllDraining: the chain's pods exist but all are draining.
	ReasonAllDraining Reason = "all_draining"
	// ReasonAtCapacity: every pod of the chain is busy.
	ReasonAtCapacity Reason = "at_capacity"
	// ReasonMerchantAtCap: the merchant has max_calls live calls (its
	// merchant config's cap); other merchants are not affected.
	ReasonMerchantAtCap Reason = "merchant_at_cap"
	// ReasonCallEnded labels allocations refused with ErrCallEnded (the
	// allocations metric's result).
	ReasonCallEnded Reason = "call_ended"
	// ReasonInProgress: the predecessor holds the call's idempotency lock
	// (it is allocating the call, or failed to and left its lock) and
	// stored no pod within PredecessorLockWait.
	ReasonInProgress Reason = "in_progress"
)

// NoCapacityError is the ErrNoCapacity outcome with its reason.
type NoCapacityError struct {
	Reason Reason
	Chain  []string
}

func (e *NoCapacityError) Error() string {
	return fmt.Sprintf("no capacity (%s) in chain %v", e.Reason, e.Chain)
}

// Is makes errors.Is(err, ErrNoCapacity) true.
func (e *NoCapacityError) Is(target error) bool { return target == ErrNoCapacity }
