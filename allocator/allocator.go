package allocator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Allocator owns edge's Redis data model: it allocates, releases, renews and
// drains with one Lua script (one round trip) each, and registers pods.
// It is safe for concurrent use.
type Allocator struct {
	rdb     redis.UniversalClient
	keys    Keys
	scripts map[string]*script
	metrics *metrics
	current atomic.Pointer[settings]
	// applyMu orders writers of current, so that ApplyTTLs and ApplyTiers
	// (config reload and tier refresh, on different goroutines) never undo
	// each other's change.
	applyMu sync.Mutex
	// merchantTiers are the tier config's merchant pools (merchanttiers.go).
	merchantTiers atomic.Pointer[map[string]int]
}

// settings is the run-time part of Config with the tier table already laid
// out as script arguments.
type settings struct {
	cfg       Config
	tierArgs  []any // N, then name, type, max_concurrent per tier, then M, chain
	poolsArgs []any // N, then tier, type per tier (status.lua)
}

// New returns an allocator on rdb. Metrics are registered on reg (nil: not
// registered anywhere).
func New(rdb redis.UniversalClient, cfg Config, reg prometheus.Registerer) (*Allocator, error) {
	keys := NewKeys(cfg.KeyPrefix)
	scripts, err := loadScripts(keys)
	if err != nil {
		return nil, fmt.Errorf("load allocator scripts: %w", err)
	}
	a := &Allocator{rdb: rdb, keys: keys, scripts: scripts, metrics: newMetrics(reg)}
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
	s.poolsArgs = append(s.poolsArgs, len(names))
	for _, name := range names {
		t := cfg.Tiers.Tiers[name]
		s.tierArgs = append(s.tierArgs, name, string(t.Type), t.MaxConcurrent)
		s.poolsArgs = append(s.poolsArgs, name, string(t.Type))
	}
	s.tierArgs = append(s.tierArgs, len(cfg.Tiers.DefaultChain))
	for _, step := range cfg.Tiers.DefaultChain {
		s.tierArgs = append(s.tierArgs, step)
	}
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
	// Warning is a note for the log, e.g. an unreadable merchant config that
	// made allocation fall back to the default chain.
	Warning string
}

// Allocate gives the call a pod in one Redis round trip. It returns a
// *NoCapacityError (errors.Is ErrNoCapacity) when the chain has no room,
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
	if len(req.TraceParent) > MaxTraceParentLength {
		return Allocation{}, fmt.Errorf("%w: traceparent is %d bytes long, the limit is %d", ErrInvalidID, len(req.TraceParent), MaxTraceParentLength)
	}
	s := a.current.Load()
	args := make([]any, 0, 6+len(s.tierArgs))
	args = append(args, req.CallID, req.MerchantID, s.cfg.EffectiveLeaseTTL().Milliseconds(), s.cfg.CallInfoTTL.Milliseconds(), req.Creator)
	args = append(args, s.tierArgs...)
	// Last, whatever comes before it (allocate.lua reads ARGV[#ARGV]).
	args = append(args, req.TraceParent)
	keys := []string{a.keys.Call(req.CallID), a.keys.CallEnded(req.CallID)}
	r, err := a.run(ctx, "allocate", keys, args...)
	if err != nil {
		a.metrics.allocations.WithLabelValues("", "error").Inc()
		return Allocation{}, fmt.Errorf("allocate %s: %w", req.CallID, err)
	}
	rep := reply(r)
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
		}
		result := "success"
		if al.WasExisting {
			result = "existing"
		}
		a.metrics.allocations.WithLabelValues(al.SourcePool, result).Inc()
		return al, nil
	case "ended":
		a.metrics.allocations.WithLabelValues("", string(ReasonCallEnded)).Inc()
		return Allocation{}, fmt.Errorf("allocate %s (%s): %w", req.CallID, rep.str(1), ErrCallEnded)
	case "none":
		reason := Reason(rep.str(1))
		a.metrics.allocations.WithLabelValues("", string(reason)).Inc()
		return Allocation{Warning: rep.str(2)}, &NoCapacityError{Reason: reason, Chain: rep.strs(3)}
	default:
		return Allocation{}, fmt.Errorf("allocate %s: unexpected script reply %v", req.CallID, r)
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
