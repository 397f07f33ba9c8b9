package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// PodInfo is what Redis knows of one pod.
type PodInfo struct {
	Name string `json:"pod_name"`
	Tier string `json:"tier"`
	// State is the pod's one-word state for operators (State* below).
	State string `json:"state"`
	// Address is where the media proxy dials it ("" when the pod
	// metadata has none).
	Address  string    `json:"address,omitempty"`
	Status   string    `json:"status"`
	Draining bool      `json:"is_draining"`
	Unready  bool      `json:"unready,omitempty"`
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

// A pod's State, the first that holds: out of allocation after failed
// dials, reported not ready by the pod source, draining, held by a call
// (a shared pod with calls; an exclusive one whose lease or recorded owner
// names a call, until its release or the sweep frees it), else free for
// new calls.
const (
	StateEjected   = "ejected"
	StateUnready   = "unready"
	StateDraining  = "draining"
	StateAllocated = "allocated"
	StateAvailable = "available"
)

// LiveCalls are the calls the pod serves: its per-call leases (shared),
// else the call holding its lease (exclusive).
func (p PodInfo) LiveCalls() []string {
	if len(p.Calls) > 0 {
		return p.Calls
	}
	if p.Lease != "" {
		return []string{p.Lease}
	}
	return nil
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
	var r *podReads
	_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		r = a.queuePodReads(ctx, p, pod)
		return nil
	})
	return r.decode(err)
}

// Pods reads every registered pod's state, sorted by name: one read for
// the list, then one pipeline per podsPerPipeline pods. An admin read
// (the pods list, the status page), not the call path.
func (a *Allocator) Pods(ctx context.Context) ([]PodInfo, error) {
	names, err := a.RegisteredPods(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]PodInfo, 0, len(names))
	for batch := range slices.Chunk(names, podsPerPipeline) {
		reads := make([]*podReads, 0, len(batch))
		_, err := a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, pod := range batch {
				reads = append(reads, a.queuePodReads(ctx, p, pod))
			}
			return nil
		})
		for _, r := range reads {
			info, err := r.decode(err)
			if errors.Is(err, ErrPodNotFound) {
				continue // unregistered since the list was read
			}
			if err != nil {
				return nil, err
			}
			out = append(out, info)
		}
	}
	return out, nil
}

// podsPerPipeline bounds one pipeline of Pods: 7 reads a pod.
const podsPerPipeline = 256

// podReads are one pod's reads queued on a pipeline.
type podReads struct {
	pod         string
	tiers       map[string]Tier // the tier config in effect, for the pod's type
	tier, lease *redis.StringCmd
	meta        *redis.StringCmd
	hash        *redis.MapStringStringCmd
	draining    *redis.IntCmd
	calls       *redis.StringSliceCmd
	ejected     *redis.FloatCmd
}

func (a *Allocator) queuePodReads(ctx context.Context, p redis.Pipeliner, pod string) *podReads {
	r := &podReads{pod: pod, tiers: a.current.Load().cfg.Tiers.Tiers}
	r.ejected = p.ZScore(ctx, a.keys.Ejected(), pod)
	r.tier = p.Get(ctx, a.keys.PodTier(pod))
	r.hash = p.HGetAll(ctx, a.keys.PodInfo(pod))
	r.draining = p.Exists(ctx, a.keys.PodDraining(pod))
	r.lease = p.Get(ctx, a.keys.Lease(pod))
	r.calls = p.ZRange(ctx, a.keys.PodCalls(pod), 0, -1)
	r.meta = p.HGet(ctx, a.keys.PodMetadata(), pod)
	return r
}

// decode builds the PodInfo once the pipeline ran (err is its error).
// Pipelined reports only the first failed command, and a missing key
// (redis.Nil) counts as one: every command's own error is checked, so a
// failed read behind a missing lease is not taken for "missing".
func (r *podReads) decode(err error) (PodInfo, error) {
	pod := r.pod
	for _, e := range []error{err, r.tier.Err(), r.hash.Err(), r.draining.Err(), r.lease.Err(), r.calls.Err(), r.ejected.Err(), r.meta.Err()} {
		if e != nil && !isNil(e) {
			return PodInfo{}, fmt.Errorf("read pod %s: %w", pod, unavailable(e))
		}
	}
	if isNil(r.tier.Err()) {
		return PodInfo{}, fmt.Errorf("read pod %s: %w", pod, ErrPodNotFound)
	}
	h := r.hash.Val()
	var ej *PodEjection
	if r.ejected.Err() == nil {
		failures, _ := strconv.Atoi(h["failures"])
		ej = &PodEjection{Reason: h["ejected_reason"], Since: parseMillis(h["ejected_at"]), Failures: failures,
			ProbeDue: time.UnixMilli(int64(r.ejected.Val()))}
	}
	var meta struct {
		Address string `json:"address"`
	}
	_ = json.Unmarshal([]byte(r.meta.Val()), &meta) // absent or not edge's: no address
	info := PodInfo{
		Ejection: ej,
		Name:     pod,
		Tier:     r.tier.Val(),
		Address:  meta.Address,
		Status:   h["status"],
		Draining: r.draining.Val() == 1,
		Unready:  h["unready"] == "1",
		CallID:   h["allocated_call_sid"],
		Since:    parseSeconds(h["allocated_at"]),
		Released: parseSeconds(h["released_at"]),
		Source:   h["source_pool"],
		Lease:    r.lease.Val(),
		Calls:    r.calls.Val(),
	}
	switch {
	case info.Ejection != nil:
		info.State = StateEjected
	case info.Unready:
		info.State = StateUnready
	case info.Draining:
		info.State = StateDraining
	case len(info.LiveCalls()) > 0, info.CallID != "" && r.tiers[info.Tier].Type != Shared:
		// An exclusive pod whose record names its owner is out of its
		// available pool, lease key or not (a lease that ran out before
		// the sweep came; in migration mode a call younger than the
		// predecessor's lease): the status counts it taken. A shared
		// pod's record may still name a call after its last one ended
		// (the migration sweep leaves it): its calls decide.
		info.State = StateAllocated
	default:
		info.State = StateAvailable
	}
	return info, nil
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
	// (MediaLeases.Claim), "" when none is.
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
// voice:merchant:<tier>:*) is counted on those keys, with the pods pinned
// to the tier itself (in its own pools), and reported under the tier's
// name, as the predecessor's status did; other merchant pools are reported
// as "merchant:<id>".
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
			out[len(out)-1].Placement = t.effectivePlacement()
		}
	}
	return out, nil
}
