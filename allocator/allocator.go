package allocator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// Allocator owns edge's Redis data model: it allocates, releases, renews and
// drains with one Lua script (one round trip) each, and registers pods.
// It is safe for concurrent use.
type Allocator struct {
	rdb     redis.UniversalClient
	keys    Keys
	scripts map[string]*script
	metrics *metrics
	// tracer, when set, spans each script run (TraceScripts).
	tracer  trace.Tracer
	current atomic.Pointer[settings]
	// applyMu orders writers of current, so that ApplyTTLs and ApplyTiers
	// (config reload and tier refresh, on different goroutines) never undo
	// each other's change.
	applyMu sync.Mutex
	// merchantTiers are the tier config's merchant pools (merchanttiers.go).
	merchantTiers atomic.Pointer[map[string]int]
	// waits are the calls waiting for capacity on this replica, woken by
	// the Waker (wait.go); wakers counts the Wakers running: without
	// one nobody would wake a waiter, so nobody waits.
	waits  waitRegistry
	wakers atomic.Int32
	// tracked are the calls whose media sockets this replica holds, and
	// the data set epoch it knows (recovery.go).
	tracked tracker
	// retry holds the socket releases Redis did not take (releaseretry.go).
	retry releaseRetry
	// endedLayout is the last look for marks of the layout before
	// (endedlayout.go).
	endedLayout endedLayout
}

// settings is the run-time part of Config with the tier table already laid
// out as script arguments.
type settings struct {
	cfg       Config
	tierArgs  []any  // N, then name, type (and max_concurrent, placement if shared) per tier, then M, chain
	poolTypes string // every tier and its type, space separated pairs (release.lua)
	rateArgs  []any  // admission rates after tierArgs (allocate.lua)
}

// New returns an allocator on rdb. Metrics are registered on reg (nil: not
// registered anywhere).
func New(rdb redis.UniversalClient, cfg Config, reg prometheus.Registerer) (*Allocator, error) {
	keys := NewKeys(cfg.KeyPrefix)
	scripts, err := loadScripts(keys)
	if err != nil {
		return nil, fmt.Errorf("load allocator scripts: %w", err)
	}
	a := &Allocator{rdb: rdb, keys: keys, scripts: scripts, metrics: newMetrics(reg), retry: newReleaseRetry(reg)}
	a.waits.m = map[string][]*waiter{}
	a.Apply(cfg)
	return a, nil
}

// Keys is the key schema the allocator writes.
func (a *Allocator) Keys() Keys { return a.keys }

// Apply swaps in new TTLs and tiers; calls in flight finish on the old ones.
// KeyPrefix cannot change after New and is ignored.
func (a *Allocator) Apply(cfg Config) {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.store(cfg)
}

func (a *Allocator) store(cfg Config) {
	cfg = cfg.withDefaults()
	cfg.KeyPrefix = a.keys.Prefix()
	s := &settings{cfg: cfg}
	names := cfg.Tiers.derivedChain() // every tier, in a stable order
	s.tierArgs = append(s.tierArgs, len(names))
	var pools []string
	for _, name := range names {
		t := cfg.Tiers.Tiers[name]
		s.tierArgs = append(s.tierArgs, name, string(t.Type))
		if t.Type == Shared {
			s.tierArgs = append(s.tierArgs, t.MaxConcurrent, string(t.effectivePlacement()))
		}
		pools = append(pools, name, string(t.Type))
	}
	s.tierArgs = append(s.tierArgs, len(cfg.Tiers.DefaultChain))
	for _, step := range cfg.Tiers.DefaultChain {
		s.tierArgs = append(s.tierArgs, step)
	}
	s.poolTypes = strings.Join(pools, " ")
	s.rateArgs = cfg.Admission.rateArgs()
	a.current.Store(s)
}

// ApplyTTLs swaps in cfg's lifetimes and keeps the tiers in effect: those
// come from voice:tier:config, which changes apart from edge's own config.
func (a *Allocator) ApplyTTLs(cfg Config) {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	cfg.Tiers = a.Config().Tiers
	a.store(cfg)
}

// ApplyTiers swaps in a tier config and keeps the lifetimes in effect.
func (a *Allocator) ApplyTiers(tc TierConfig) {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	cfg := a.Config()
	cfg.Tiers = tc
	a.store(cfg)
}

// Config is the configuration in effect.
func (a *Allocator) Config() Config { return a.current.Load().cfg }

// Request asks for a pod for one call.
type Request struct {
	CallID     string
	MerchantID string // optional
	// Creator says who asks, e.g. "provider:twilio" or "token:<name>"
	// (at most MaxCreatorLength bytes; "" for unknown). It is stored with
	// a new call and returned on every repeat, so that the caller can tell
	// a retry of its own call from a stranger naming someone else's.
	Creator string
	// Account is the provider account whose credentials verified the
	// webhook that asks (plugins.WebhookResult.Account; at most
	// MaxAccountLength bytes of [A-Za-z0-9_-], "" for none). It is
	// stored with a new call and returned on every repeat, and
	// EndByProvider ends a call stored with one only for that account.
	Account string
	// TraceParent is the W3C traceparent of the span asking (package
	// tracing), stored with a new call for its media socket's span link;
	// "" stores nothing. At most MaxTraceParentLength bytes.
	TraceParent string
}

// MaxTraceParentLength bounds Request.TraceParent (version 00 is 55
// bytes; a later version may grow).
const MaxTraceParentLength = 128

// MaxCreatorLength bounds Request.Creator.
const MaxCreatorLength = 256

// MaxAccountLength bounds Request.Account.
const MaxAccountLength = 64

// Allocation is a call's pod.
type Allocation struct {
	CallID     string
	PodName    string
	SourcePool string // "pool:<tier>" or "merchant:<id>"
	// Shared is true when the pod takes several calls (a shared tier).
	Shared bool
	// WasExisting is true when the call already had this pod (a retry or a
	// concurrent duplicate).
	WasExisting bool
	// Creator is who created the call (Request.Creator of its first
	// allocate). On a repeat it may differ from the asker's: only the
	// creator may be shown the call's media URL. "" when unknown (the call
	// was allocated by the predecessor, or by an edge that did not record
	// creators): nobody's, so shown to nobody.
	Creator string
	// Account is the provider account stored with the call
	// (Request.Account of its first allocate), "" for none. On a repeat
	// it may differ from the asker's.
	Account string
	// Warning is a note for the log, e.g. an unreadable merchant config that
	// made allocation fall back to the default chain.
	Warning string
	// Waited is how long the call waited for capacity (admission.wait)
	// before it got its pod; 0 when it did not wait.
	Waited time.Duration
}

// Allocate gives the call a pod in one Redis round trip. When every pod of
// the chain is busy and admission.wait.budget is set (and a Waker runs), it
// waits up to the budget for one (wait.go), within ctx: a caller who gives
// up (ctx ends) takes no pod. It returns a
// *NoCapacityError (errors.Is ErrNoCapacity) when the chain has no room
// (or the merchant is at its max_calls), a *RateLimitedError (errors.Is
// ErrRateLimited) when the merchant or the source is over its rate,
// ErrCallEnded when the call already ended (a late or replayed webhook),
// ErrInvalidID for ids unfit for key names (or a creator too long), and a
// wrapped Redis error otherwise. A failure leaves nothing behind in Redis.
//
// A repeat of a live call returns its allocation with WasExisting set and
// the call's Creator, whoever asks: the caller decides what a stranger may
// see.
func (a *Allocator) Allocate(ctx context.Context, req Request) (Allocation, error) {
	if err := ValidateID("call_sid", req.CallID); err != nil {
		return Allocation{}, err
	}
	if req.MerchantID != "" {
		if err := ValidateID("merchant_id", req.MerchantID); err != nil {
			return Allocation{}, err
		}
	}
	if len(req.Creator) > MaxCreatorLength {
		return Allocation{}, fmt.Errorf("%w: creator is %d bytes long, the limit is %d", ErrInvalidID, len(req.Creator), MaxCreatorLength)
	}
	if err := validAccount(req.Account); err != nil {
		return Allocation{}, err
	}
	if len(req.TraceParent) > MaxTraceParentLength {
		return Allocation{}, fmt.Errorf("%w: traceparent is %d bytes long, the limit is %d", ErrInvalidID, len(req.TraceParent), MaxTraceParentLength)
	}
	// Right after Redis lost its data no pod is offered until the replicas
	// have re-asserted their calls (recovery.go): the call asks again when
	// the hold ends, for at most twice the hold and within ctx.
	deadline := time.Now().Add(2 * a.current.Load().cfg.RecoveryHold)
	// While the predecessor holds the call's lock it is allocating the
	// call: the call asks again until its pod appears (predecessorlock.go).
	var lockEnd time.Time
	for {
		al, err := a.allocate(ctx, req)
		if waitRecovery(ctx, err, deadline) {
			continue
		}
		if errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrRecovering) {
			// The script may still run once Redis catches up (a pause):
			// the caller is told edge cannot serve, so whatever it
			// allocates is released again (releaseretry.go).
			a.releaseLater(req.CallID, ReleasedUnanswered, nil)
		}
		if !errors.Is(err, errPredecessorLock) {
			return al, err
		}
		if lockEnd.IsZero() {
			lockEnd = predecessorLockEnd(ctx)
		}
		if !waitPredecessorLock(ctx, lockEnd) {
			a.metrics.allocations.WithLabelValues("", string(ReasonInProgress)).Inc()
			return Allocation{}, fmt.Errorf("allocate %s: %w", req.CallID, &NoCapacityError{Reason: ReasonInProgress})
		}
	}
}

func (a *Allocator) allocate(ctx context.Context, req Request) (Allocation, error) {
	s := a.current.Load()
	if budget := a.waitBudget(ctx, s); budget > 0 {
		if w := a.waits.add(req.CallID, s.cfg.Admission.Wait.maxWaiters()); w != nil {
			defer a.waits.remove(req.CallID, w)
			return a.allocateWaiting(ctx, req, s, w, budget)
		}
	}
	al, _, err := a.allocateOnce(ctx, req, s, 0, nil)
	return al, err
}

// allocateOnce runs allocate.lua once. With budget > 0 a call that finds
// every pod busy starts (or keeps) waiting: it returns its deadline, and
// no error and no allocation, and sets *chain (when not nil) to the chain
// it waits for. Outcomes are counted in allocations_total, except a wait,
// whose outcome comes later.
func (a *Allocator) allocateOnce(ctx context.Context, req Request, s *settings, budget time.Duration, chain *[]string) (Allocation, time.Time, error) {
	args := make([]any, 0, 18+len(s.tierArgs)+len(s.rateArgs))
	args = append(args, req.CallID, req.MerchantID, s.cfg.EffectiveLeaseTTL().Milliseconds(), s.cfg.CallInfoTTL.Milliseconds(), req.Creator)
	args = append(args, s.tierArgs...)
	args = append(args, s.rateArgs...)
	args = append(args, budget.Milliseconds(), a.tracked.knownEpoch(), randomEpoch(), s.cfg.RecoveryHold.Milliseconds(),
		s.cfg.EndedTTL.Milliseconds(), s.cfg.Admission.Demand.uncappedCalls(), a.tracked.replicaName(),
		a.legacyMarksArg())
	// Last but two, last but one and last, whatever comes before them
	// (allocate.lua reads ARGV[#ARGV - 2], ARGV[#ARGV - 1], ARGV[#ARGV]).
	args = append(args, staleAfter(ctx), req.Account, req.TraceParent)
	keys := []string{a.keys.Call(req.CallID), a.keys.CallEnded(req.CallID), a.keys.EndedMarksOf(req.CallID)}
	r, err := a.run(ctx, "allocate", keys, args...)
	if err != nil {
		result := "error"
		if errors.Is(err, ErrUnavailable) {
			result = resultUnavailable
		}
		a.metrics.allocations.WithLabelValues("", result).Inc()
		return Allocation{}, time.Time{}, fmt.Errorf("allocate %s: %w", req.CallID, err)
	}
	al, err := a.decodeAllocate(req, reply(r))
	if errors.Is(err, errWaiting) {
		if chain != nil {
			*chain = reply(r).strs(3)
		}
		return al, time.UnixMilli(reply(r).int(1)), nil
	}
	return al, time.Time{}, err
}

// decodeAllocate turns allocate.lua's reply into the outcome, counting it.
func (a *Allocator) decodeAllocate(req Request, rep reply) (Allocation, error) {
	switch rep.str(0) {
	case "ok":
		al := Allocation{
			CallID:      req.CallID,
			PodName:     rep.str(1),
			SourcePool:  rep.str(2),
			WasExisting: rep.int(3) == 1,
			Shared:      rep.str(4) == string(Shared),
			Warning:     rep.str(5),
			Creator:     rep.str(6),
			Account:     rep.str(7),
		}
		result := "success"
		if al.WasExisting {
			result = "existing"
		}
		// Answered: should Redis lose its data before the socket comes,
		// this replica writes the call back (recovery.go).
		kind := string(Exclusive)
		if al.Shared {
			kind = string(Shared)
		}
		a.tracked.answered(req.CallID, trackedCall{pod: al.PodName, source: al.SourcePool, kind: kind,
			merchant: req.MerchantID, creator: al.Creator, account: al.Account}, a.current.Load().cfg.EffectiveLeaseTTL())
		a.metrics.allocations.WithLabelValues(al.SourcePool, result).Inc()
		return al, nil
	case "limited":
		a.metrics.allocations.WithLabelValues("", string(ReasonRateLimited)).Inc()
		return Allocation{Warning: rep.str(3)}, &RateLimitedError{Scope: rep.str(1), RetryAfter: time.Duration(rep.int(2)) * time.Millisecond}
	case "ended":
		a.metrics.allocations.WithLabelValues("", string(ReasonCallEnded)).Inc()
		return Allocation{}, fmt.Errorf("allocate %s (%s): %w", req.CallID, rep.str(1), ErrCallEnded)
	case "none":
		reason := Reason(rep.str(1))
		a.metrics.allocations.WithLabelValues("", string(reason)).Inc()
		return Allocation{Warning: rep.str(2)}, &NoCapacityError{Reason: reason, Chain: rep.strs(3)}
	case "wait":
		return Allocation{Warning: rep.str(2)}, errWaiting
	case "locked":
		// Not counted: the outcome is the call's once the wait ends.
		return Allocation{}, fmt.Errorf("allocate %s: %w", req.CallID, errPredecessorLock)
	case "stale":
		// Nobody reads this: the caller gave up before the script ran.
		a.metrics.allocations.WithLabelValues("", resultUnavailable).Inc()
		return Allocation{}, fmt.Errorf("allocate %s: %w", req.CallID, errStale)
	case "recovering":
		a.metrics.allocations.WithLabelValues("", "recovering").Inc()
		return Allocation{}, fmt.Errorf("allocate %s: %w", req.CallID, &recoveringError{wait: time.Duration(rep.int(1)) * time.Millisecond})
	default:
		return Allocation{}, fmt.Errorf("allocate %s: unexpected script reply %v", req.CallID, []any(rep))
	}
}

// parseSeconds reads a unix-seconds field written by the scripts.
func parseSeconds(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// isNil reports a missing key or field.
func isNil(err error) bool { return errors.Is(err, redis.Nil) }

// validAccount checks a provider account's label: "" or [A-Za-z0-9_-], at
// most MaxAccountLength bytes, as plugins.ValidAccount does.
func validAccount(account string) error {
	if len(account) > MaxAccountLength {
		return fmt.Errorf("%w: account is %d bytes long, the limit is %d", ErrInvalidID, len(account), MaxAccountLength)
	}
	for i := 0; i < len(account); i++ {
		if c := account[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: account holds a byte outside [A-Za-z0-9_-]", ErrInvalidID)
		}
	}
	return nil
}
