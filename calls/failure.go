package calls

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/edge-voice/edge/allocator"
)

// Errors of the faces themselves (body, auth, shutdown), mapped with the
// allocator's outcomes in FailureOf.
var (
	ErrBodyTooLarge = errors.New("request body too large")
	ErrBadRequest   = errors.New("bad request")
	ErrUnauthorized = errors.New("unauthorized")
	ErrForbidden    = errors.New("forbidden")
	ErrShuttingDown = errors.New("shutting down")
	// ErrCrossOrigin: a browser says a state-changing request comes from
	// another origin (CSRF).
	ErrCrossOrigin = errors.New("cross-origin request refused")
	// ErrNotJSON: a state-changing request whose body is not JSON.
	ErrNotJSON = errors.New("the body must be JSON (Content-Type: application/json)")
	// ErrCallExists: the call is live and was created by another caller,
	// who alone may learn its media URL.
	ErrCallExists = errors.New("call exists")
)

// Kind is what a face branches on when it answers a failure: a provider
// plugin renders "no capacity" and "invalid request" in its own markup.
type Kind int

const (
	KindInternal Kind = iota
	KindNoCapacity
	KindInvalid
	KindNotFound
	KindConflict
	KindUnauthorized
	KindForbidden
	KindUnavailable
	// KindEnded: the call has ended; a late or replayed webhook gets the
	// provider's hangup answer and no pod.
	KindEnded
)

// Failure is how a failed call operation is answered: its kind, an HTTP
// status, a stable code for machines (the no-capacity reasons are the
// allocator's: no_pods, all_draining, at_capacity, merchant_at_cap) and a message safe to
// show the caller. The cause goes to the log only.
type Failure struct {
	Kind    Kind
	Status  int
	Code    string
	Message string
}

// EdgeFault reports whether edge failed for reasons of its own (Redis
// unreachable or timing out, shutting down, an internal error) rather than
// refusing something about the call itself (every pod busy after the wait,
// the merchant's cap or rate, an ended call, a bad or foreign request).
// It is the one place that line is drawn. A provider webhook answers an
// edge fault so that the provider calls the number's fallback URL, where
// another edge cluster may take the call; a refusal keeps the provider's
// markup: edge decided about this call, and its caller hears the decision.
//
// A chain with no pod registered, or only draining ones, is edge's state
// too, not a judgement on the call: pods not yet registered after Redis
// lost its data, an agents' rollout draining a whole tier. Another cluster
// behind the fallback URL may well have room, so those go there too; a
// chain whose pods are all busy is capacity, and keeps the markup.
func (f Failure) EdgeFault() bool {
	if f.Kind == KindNoCapacity {
		return f.Code == string(allocator.ReasonNoPods) || f.Code == string(allocator.ReasonAllDraining)
	}
	return f.Kind == KindInternal || f.Kind == KindUnavailable
}

// FailureOf maps an error to its answer. It is the one place where errors
// become HTTP statuses, for the generic API, the admin API and the
// provider webhooks alike.
func FailureOf(err error) Failure {
	var nc *allocator.NoCapacityError
	switch {
	case errors.As(err, &nc):
		msg := "no pods available"
		switch nc.Reason {
		case allocator.ReasonAllDraining:
			msg = "all pods are draining"
		case allocator.ReasonAtCapacity:
			msg = "all pods are busy"
		case allocator.ReasonMerchantAtCap:
			msg = "the merchant has reached its maximum of live calls"
		case allocator.ReasonInProgress:
			msg = "the call is being allocated by another router, retry"
		}
		return Failure{KindNoCapacity, http.StatusServiceUnavailable, string(nc.Reason), msg}
	case errors.Is(err, allocator.ErrRateLimited):
		// Kind no capacity: a provider renders it with its failure markup
		// (a hangup), reason rate_limited; the generic API answers 429 with
		// Retry-After (RetryAfter).
		return Failure{KindNoCapacity, http.StatusTooManyRequests, string(allocator.ReasonRateLimited), "too many new calls, retry later"}
	case errors.Is(err, allocator.ErrCallEnded):
		return Failure{KindEnded, http.StatusGone, "call_ended", "the call has ended"}
	case errors.Is(err, allocator.ErrOtherAccount):
		return Failure{KindForbidden, http.StatusForbidden, "other_account", "the call belongs to another account of its provider"}
	case errors.Is(err, ErrCallExists):
		return Failure{KindConflict, http.StatusConflict, "call_exists", "the call exists and belongs to another caller"}
	case errors.Is(err, ErrBodyTooLarge):
		return Failure{KindInvalid, http.StatusRequestEntityTooLarge, "body_too_large", err.Error()}
	case errors.Is(err, allocator.ErrInvalidID), errors.Is(err, ErrBadRequest), errors.Is(err, allocator.ErrInvalidConfig):
		return Failure{KindInvalid, http.StatusBadRequest, "invalid_request", err.Error()}
	case errors.Is(err, allocator.ErrCallNotFound):
		return Failure{KindNotFound, http.StatusNotFound, "call_not_found", "call not found"}
	case errors.Is(err, allocator.ErrPodNotFound):
		return Failure{KindNotFound, http.StatusNotFound, "pod_not_found", "pod not found"}
	case errors.Is(err, allocator.ErrPodReplaced):
		return Failure{KindConflict, http.StatusConflict, "pod_replaced", "another instance of the pod is registered under its name"}
	case errors.Is(err, allocator.ErrPodBusy):
		return Failure{KindConflict, http.StatusConflict, "pod_busy", err.Error()}
	case errors.Is(err, ErrUnauthorized):
		return Failure{KindUnauthorized, http.StatusUnauthorized, "unauthorized", "unauthorized"}
	case errors.Is(err, ErrCrossOrigin):
		return Failure{KindForbidden, http.StatusForbidden, "cross_origin", ErrCrossOrigin.Error()}
	case errors.Is(err, ErrNotJSON):
		return Failure{KindInvalid, http.StatusUnsupportedMediaType, "unsupported_media_type", ErrNotJSON.Error()}
	case errors.Is(err, ErrForbidden):
		return Failure{KindForbidden, http.StatusForbidden, "forbidden", "forbidden"}
	case errors.Is(err, ErrShuttingDown):
		return Failure{KindUnavailable, http.StatusServiceUnavailable, "shutting_down", "shutting down"}
	case errors.Is(err, allocator.ErrUnavailable):
		return Failure{KindUnavailable, http.StatusServiceUnavailable, "redis_unavailable", "pool state unavailable, retry"}
	case errors.Is(err, context.DeadlineExceeded):
		return Failure{KindUnavailable, http.StatusServiceUnavailable, "timeout", "backend timeout"}
	default:
		return Failure{KindInternal, http.StatusInternalServerError, "internal", "internal error"}
	}
}

// RetryAfter is when a refused request may be retried (the generic API's
// Retry-After), in whole seconds rounded up; 0 when err says nothing.
func RetryAfter(err error) int {
	var rl *allocator.RateLimitedError
	if !errors.As(err, &rl) {
		return 0
	}
	return max(1, int((rl.RetryAfter+time.Second-1)/time.Second))
}
