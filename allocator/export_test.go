package allocator

import (
	"context"
	"time"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// What the package's external tests call of its unexported API: the
// allocator's own steps under the names the tests use. Nothing outside
// the package calls them; the media proxy reaches them through
// MediaLeases.

// ClaimMedia is MediaLeases{Alloc: a}.Claim (no replica named) that
// returns the pod alone, as most of the tests want it.
func (a *Allocator) ClaimMedia(ctx context.Context, callID, pod, holder string) (string, error) {
	c, err := a.claimMediaOn(ctx, callID, pod, holder, "")
	return c.Pod, err
}

// DropMediaClaim reports whether holder held the claim, which
// MediaLeases.Unclaim does not.
func (a *Allocator) DropMediaClaim(ctx context.Context, callID, holder string) (bool, error) {
	return a.dropMediaClaim(ctx, callID, holder, "")
}

// PodFailed returns the next probe's time too, which MediaLeases.PodFailed
// does not.
func (a *Allocator) PodFailed(ctx context.Context, pod, reason string, ej Ejection) (bool, time.Time, error) {
	return a.podFailed(ctx, pod, reason, ej)
}

// RetriedReleases counts the socket releases waiting for Redis now.
func (a *Allocator) RetriedReleases() int {
	a.retry.mu.Lock()
	defer a.retry.mu.Unlock()
	return len(a.retry.pending) + a.retry.trying
}

func (a *Allocator) ClaimMediaOn(ctx context.Context, callID, pod, holder, replica string) (ClaimedMedia, error) {
	return a.claimMediaOn(ctx, callID, pod, holder, replica)
}

func (a *Allocator) ClaimMediaTraced(ctx context.Context, callID, pod, holder string) (string, string, error) {
	return a.claimMediaTraced(ctx, callID, pod, holder)
}

func (a *Allocator) DropFailedMediaClaim(ctx context.Context, callID, holder string) (bool, error) {
	return a.dropFailedMediaClaim(ctx, callID, holder)
}

func (a *Allocator) Demand(ctx context.Context) ([]TierDemand, error) { return a.demand(ctx) }

func (a *Allocator) MoveCall(ctx context.Context, callID, pod, holder, reason string, ej Ejection) (Failover, error) {
	return a.moveCall(ctx, callID, pod, holder, reason, ej, moveConnect)
}

func (a *Allocator) Reinstate(ctx context.Context, pod string) (bool, error) {
	return a.reinstate(ctx, pod)
}

func (a *Allocator) ReleaseSocketEnd(ctx context.Context, callID string, end SocketEnd) (Released, error) {
	return a.releaseSocketEnd(ctx, callID, end)
}

func (a *Allocator) RenewSockets(ctx context.Context, leases []Lease) ([]mediacontract.Renewal, error) {
	return a.renewSockets(ctx, leases)
}

func (a *Allocator) Tracked() int { return a.trackedCalls() }

func (t Tier) EffectivePlacement() Placement { return t.effectivePlacement() }

func (tc TierConfig) ValidateMerchantConfig(id string, mc MerchantConfig) error {
	return tc.validateMerchantConfig(id, mc)
}
