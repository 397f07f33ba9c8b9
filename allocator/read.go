package allocator

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// PodInfo is what Redis knows of one pod.
type PodInfo struct {
	Name     string    `json:"pod_name"`
	Tier     string    `json:"tier"`
	Status   string    `json:"status"`
	Draining bool      `json:"is_draining"`
	CallID   string    `json:"allocated_call_sid,omitempty"`
	Since    time.Time `json:"allocated_at,omitzero"`
	Released time.Time `json:"released_at,omitzero"`
	Source   string    `json:"source_pool,omitempty"`
	// Lease is the call id in the pod's lease key ("" when none is live).
	Lease string `json:"lease,omitempty"`
	// Calls are the calls holding a per-call lease (shared pods).
	Calls []string `json:"calls,omitempty"`
	// Ejection is set while the pod is out of allocation after failed
	// dials.
	Ejection *PodEjection `json:"ejection,omitempty"`
}

// PodEjection is a pod's passive health state: why it was ejected, since
// when, how many dials and probes failed in a row, and when the next probe
// is due (until it succeeds the pod stays out).
type PodEjection struct {
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since,omitzero"`
	Failures int       `json:"failures"`
	ProbeDue time.Time `json:"probe_due"`
}

// PodInfo reads one pod's state in one round trip (a pipeline of reads).
func (a *Allocator) PodInfo(ctx context.Context, pod string) (PodInfo, error) {
	if err := ValidateID("pod_name", pod); err != nil {
		return PodInfo{}, err
	}
	var tier, lease *redis.StringCmd
	var info *redis.MapStringStringCmd
	var draining *redis.IntCmd
	var calls *redis.StringSliceCmd
	var ejected *redis.FloatCmd
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ejected = p.ZScore(ctx, a.keys.Ejected(), pod)
		tier = p.Get(ctx, a.keys.PodTier(pod))
		info = p.HGetAll(ctx, a.keys.PodInfo(pod))
		draining = p.Exists(ctx, a.keys.PodDraining(pod))
		lease = p.Get(ctx, a.keys.Lease(pod))
		calls = p.ZRange(ctx, a.keys.PodCalls(pod), 0, -1)
		return nil
	})
	// Pipelined reports only the first failed command, and a missing key
	// (redis.Nil) counts as one: every command's own error is checked, so a
	// failed read behind a missing lease is not taken for "missing".
	for _, e := range []error{err, tier.Err(), info.Err(), draining.Err(), lease.Err(), calls.Err(), ejected.Err()} {
		if e != nil && !isNil(e) {
			return PodInfo{}, fmt.Errorf("read pod %s: %w", pod, unavailable(e))
		}
	}
	if isNil(tier.Err()) {
		return PodInfo{}, fmt.Errorf("read pod %s: %w", pod, ErrPodNotFound)
	}
	h := info.Val()
	var ej *PodEjection
	if ejected.Err() == nil {
		failures, _ := strconv.Atoi(h["failures"])
		ej = &PodEjection{Reason: h["ejected_reason"], Since: parseMillis(h["ejected_at"]), Failures: failures,
			ProbeDue: time.UnixMilli(int64(ejected.Val()))}
	}
	return PodInfo{
		Ejection: ej,
		Name:     pod,
		Tier:     tier.Val(),
		Status:   h["status"],
		Draining: draining.Val() == 1,
		CallID:   h["allocated_call_sid"],
		Since:    parseSeconds(h["allocated_at"]),
		Released: parseSeconds(h["released_at"]),
		Source:   h["source_pool"],
		Lease:    lease.Val(),
		Calls:    calls.Val(),
	}, nil
}

// CallInfo is a live allocation as stored in its call info.
type CallInfo struct {
	CallID     string    `json:"call_sid"`
	PodName    string    `json:"pod_name"`
	SourcePool string    `json:"source_pool"`
	MerchantID string    `json:"merchant_id,omitempty"`
	Since      time.Time `json:"allocated_at,omitzero"`
	Shared     bool      `json:"shared"`
	// Creator is who created the call (Request.Creator), "" when unknown.
	Creator string `json:"creator,omitempty"`
	// MediaClaim is the identity of the media socket admitted for the call
	// (ClaimMedia), "" when none is.
	MediaClaim string `json:"media_claim,omitempty"`
}

// Call reads a call's live allocation (one round trip); ErrCallNotFound when
// it has none.
func (a *Allocator) Call(ctx context.Context, callID string) (CallInfo, error) {
	if err := ValidateID("call_sid", callID); err != nil {
		return CallInfo{}, err
	}
	h, err := a.rdb.HGetAll(ctx, a.keys.Call(callID)).Result()
	if err != nil {
		return CallInfo{}, fmt.Errorf("read call %s: %w", callID, unavailable(err))
	}
	if h["pod_name"] == "" {
		return CallInfo{}, fmt.Errorf("read call %s: %w", callID, ErrCallNotFound)
	}
	return CallInfo{
		CallID:     callID,
		PodName:    h["pod_name"],
		SourcePool: h["source_pool"],
		MerchantID: h["merchant_id"],
		Since:      parseSeconds(h["allocated_at"]),
		Shared:     h["pool_type"] == string(Shared),
		Creator:    h["creator"],
		MediaClaim: h["media_claim"],
	}, nil
}

// PoolStatus counts one pool.
type PoolStatus struct {
	Tier      string   `json:"tier"`
	Type      TierType `json:"type"`
	Assigned  int      `json:"assigned"`
	Available int      `json:"available"`
	Draining  int      `json:"draining"`
	// Calls in progress: live leases (exclusive) or live per-call leases
	// (shared).
	Calls int `json:"calls_in_progress"`
	// Ejected counts the pool's pods out of allocation after failed dials
	// (K.Ejected).
	Ejected int `json:"ejected"`
	// Placement of a shared tier's new calls (spread or pack);
	// "" for exclusive tiers and merchant pools.
	Placement Placement `json:"placement,omitempty"`
}

// Status counts every configured tier and merchant pool in two round trips
// (the merchant config, then the counts). It costs O(pods) inside Redis:
// for status pages and scrapes, not calls.
//
// A tier the tier config declares as a merchant's dedicated pool
// (merchantTiers: the predecessor's tier assigner filled it on
// voice:merchant:<tier>:*) is counted on those keys and reported under the
// tier's name, as the predecessor's status did; other merchant pools are
// reported as "merchant:<id>".
func (a *Allocator) Status(ctx context.Context) ([]PoolStatus, error) {
	s := a.current.Load()
	mt, err := a.readMerchantTiers(ctx, s.cfg.Tiers)
	if err != nil {
		return nil, fmt.Errorf("pool status: %w", err)
	}
	args := make([]any, 0, 1+3*len(s.cfg.Tiers.Tiers))
	args = append(args, len(s.cfg.Tiers.Tiers))
	for _, name := range s.cfg.Tiers.derivedChain() {
		pool := name
		if _, ok := mt[name]; ok {
			pool = "merchant:" + name
		}
		args = append(args, name, pool, string(s.cfg.Tiers.Tiers[name].Type))
	}
	// The key routes the script to the slot of edge's keys on Redis Cluster.
	r, err := a.run(ctx, "status", []string{a.keys.MerchantPools()}, args...)
	if err != nil {
		return nil, fmt.Errorf("pool status: %w", err)
	}
	out := make([]PoolStatus, 0, len(r))
	for _, row := range r {
		f, _ := row.([]any)
		rep := reply(f)
		out = append(out, PoolStatus{
			Tier:      rep.str(0),
			Type:      TierType(rep.str(1)),
			Assigned:  int(rep.int(2)),
			Available: int(rep.int(3)),
			Draining:  int(rep.int(4)),
			Calls:     int(rep.int(5)),
			Ejected:   int(rep.int(6)),
		})
		if t, ok := s.cfg.Tiers.Tiers[rep.str(0)]; ok && t.Type == Shared {
			out[len(out)-1].Placement = t.EffectivePlacement()
		}
	}
	return out, nil
}
