package allocator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// BatchSize is how many pods one sync or sweep script call handles: large
// enough that 10,000 pods cost 20 round trips, small enough that one call
// holds Redis for only a few milliseconds.
const BatchSize = 500

// ErrFenced: a pool manager script was refused because the Redis leader lock
// no longer holds this leader's fencing token (another replica leads now).
var ErrFenced = errors.New("fenced: leadership lost")

// PodState is what a pod source says about one pod.
type PodState struct {
	Name string
	// Address is "ip:port" of its media server ("" while it has no IP).
	Address string
	// Tier pins the pod to a tier or "merchant:<id>"; "" lets tier
	// assignment choose.
	Tier string
	// Ready pods take new calls; not ready ones keep the calls they have.
	Ready bool
}

// SyncOutcome is what SyncPods did with one pod.
type SyncOutcome string

const (
	SyncAdded     SyncOutcome = "added"     // new pod, tier assigned, in its pools
	SyncMoved     SyncOutcome = "moved"     // idle pod moved to another tier
	SyncUnchanged SyncOutcome = "unchanged" // already in its tier (pools made good)
	SyncBusy      SyncOutcome = "busy"      // should move but serves calls; retried later
	SyncUnready   SyncOutcome = "unready"   // out of its available pool, calls kept
	SyncUnknown   SyncOutcome = "unknown"   // not ready and never registered
	SyncBadTier   SyncOutcome = "bad_tier"  // pinned to a tier that is not configured
)

// SyncResult is SyncPods' answer for one pod.
type SyncResult struct {
	Pod     string
	Outcome SyncOutcome
	Tier    string
}

// SyncPods makes Redis agree with the pod source for pods: a ready pod is
// registered (a new one gets a tier by tier assignment, atomically) and made
// available if idle; a not-ready one leaves its available pool but keeps its
// calls. One round trip per BatchSize pods. fence is "" or the Redis leader
// lock value (see AcquireLeaderLock); ErrFenced when another leader holds it.
func (a *Allocator) SyncPods(ctx context.Context, fence string, pods []PodState) ([]SyncResult, error) {
	if err := a.adoptMerchantTiers(ctx); err != nil {
		return nil, fmt.Errorf("sync pods: %w", err)
	}
	head := a.assignmentArgs(fence)
	// Last, after the pods: migration mode's predecessor lease (sync.lua).
	migration := int64(0)
	if a.current.Load().cfg.Migration {
		migration = PredecessorLeaseTTL.Milliseconds()
	}
	out := make([]SyncResult, 0, len(pods))
	for batch := range slices.Chunk(pods, BatchSize) {
		args := make([]any, 0, len(head)+4*len(batch)+1)
		args = append(args, head...)
		for _, p := range batch {
			if err := p.validate(); err != nil {
				return out, err
			}
			op := "unready"
			if p.Ready {
				op = "ready"
			}
			args = append(args, op, p.Name, p.Tier, p.Address)
		}
		args = append(args, migration)
		r, err := a.run(ctx, "sync", []string{a.keys.PodMetadata()}, args...)
		if err != nil {
			return out, fmt.Errorf("sync %d pods: %w", len(batch), err)
		}
		rep := reply(r)
		if rep.str(0) == "fenced" {
			return out, fmt.Errorf("sync pods: %w", ErrFenced)
		}
		for i, p := range batch {
			out = append(out, SyncResult{Pod: p.Name, Outcome: SyncOutcome(rep.str(1 + 2*i)), Tier: rep.str(2 + 2*i)})
		}
	}
	return out, nil
}

// validate refuses what must not reach a key name or the metadata JSON the
// script writes by concatenation.
func (p PodState) validate() error {
	if err := ValidateID("pod_name", p.Name); err != nil {
		return err
	}
	if p.Tier != "" {
		if err := ValidateID("tier", strings.TrimPrefix(p.Tier, merchantStep)); err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
	}
	if p.Address != "" {
		host, port, err := net.SplitHostPort(p.Address)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil {
			return fmt.Errorf("%w: pod %s: address %q is not host:port", ErrInvalidID, p.Name, p.Address)
		}
		if _, err := netip.ParseAddr(host); err != nil && host != "localhost" {
			return fmt.Errorf("%w: pod %s: address %q: host must be an IP address", ErrInvalidID, p.Name, p.Address)
		}
	}
	return nil
}

// assignmentArgs lays out the tier config for sync.lua: fence, the ended
// TTL, overflow tier, then every tier with its type and target in assignment order (the
// default chain, then the tiers only merchant fallbacks name), then the
// other tiers of the config with their types: tier assignment leaves them
// out (they are filled as merchants' pools), but a pod pinned to one of
// them joins it.
func (a *Allocator) assignmentArgs(fence string) []any {
	order := a.assignmentOrder()
	cfg := a.current.Load().cfg
	tiers := cfg.Tiers
	overflow := ""
	for _, step := range tiers.DefaultChain {
		if _, ok := tiers.Tiers[step]; ok {
			overflow = step
		}
	}
	if overflow == "" && len(order) > 0 {
		overflow = order[len(order)-1]
	}
	args := []any{fence, cfg.EndedTTL.Milliseconds(), overflow, len(order)}
	for _, name := range order {
		t := tiers.Tiers[name]
		args = append(args, name, string(t.Type), t.Target)
	}
	var others []any
	for _, name := range tiers.derivedChain() {
		if !slices.Contains(order, name) {
			others = append(others, name, string(tiers.Tiers[name].Type))
		}
	}
	args = append(args, len(others)/2)
	return append(args, others...)
}

// assignmentOrder is the default chain's tiers, then the other tiers in
// derivedChain order but the merchant tiers (merchant pools, filled first
// from K.merchant_targets): deterministic, never map order.
func (a *Allocator) assignmentOrder() []string {
	tiers := a.current.Load().cfg.Tiers
	var order []string
	seen := map[string]bool{}
	for _, step := range tiers.DefaultChain {
		if _, ok := tiers.Tiers[step]; ok && !seen[step] {
			order = append(order, step)
			seen[step] = true
		}
	}
	for _, name := range tiers.derivedChain() {
		if !seen[name] && !a.isMerchantTier(name) {
			order = append(order, name)
		}
	}
	return order
}

// RegisteredPods lists every pod edge knows (the fields of the pod metadata
// hash), in one round trip.
func (a *Allocator) RegisteredPods(ctx context.Context) ([]string, error) {
	pods, err := a.rdb.HKeys(ctx, a.keys.PodMetadata()).Result()
	if err != nil {
		return nil, fmt.Errorf("list registered pods: %w", err)
	}
	slices.Sort(pods)
	return pods, nil
}
