package allocator

import (
	"context"
	"fmt"
)

// Lease names a call and the pod it holds, for Renew.
type Lease struct {
	CallID  string
	PodName string
	// Holder, when set, is the media claim (ClaimMedia) the renewer holds:
	// the lease is renewed only while that claim holds the call, so only the
	// call's one admitted socket keeps it alive. "" renews without checking.
	Holder string
}

// RenewBatch bounds one renew script: a replica with 10,000 sockets renews
// in 20 short scripts rather than one that holds Redis for tens of
// milliseconds while allocations wait.
const RenewBatch = 500

// Renew extends the leases of calls, each only if the call still owns its
// pod (and, with a Holder, its media claim is still that holder's), in one
// round trip per RenewBatch calls. held[i] reports whether leases[i] was
// renewed; false means the call lost its pod (released, swept or the pod
// removed) or the socket lost its claim, and its media should stop. On error, the batches
// already renewed stay renewed.
func (a *Allocator) Renew(ctx context.Context, leases []Lease) (held []bool, err error) {
	held = make([]bool, 0, len(leases))
	for len(leases) > 0 {
		n := min(len(leases), RenewBatch)
		h, err := a.renewBatch(ctx, leases[:n])
		if err != nil {
			return nil, err
		}
		held = append(held, h...)
		leases = leases[n:]
	}
	return held, nil
}

func (a *Allocator) renewBatch(ctx context.Context, leases []Lease) ([]bool, error) {
	s := a.current.Load()
	keys := make([]string, len(leases))
	args := make([]any, 0, 2+3*len(leases))
	args = append(args, s.cfg.EffectiveLeaseTTL().Milliseconds(), s.cfg.CallInfoTTL.Milliseconds())
	for i, l := range leases {
		keys[i] = a.keys.Call(l.CallID)
		args = append(args, l.CallID, l.PodName, l.Holder)
	}
	r, err := a.run(ctx, "renew", keys, args...)
	if err != nil {
		return nil, fmt.Errorf("renew %d leases: %w", len(leases), err)
	}
	held := make([]bool, len(leases))
	for i := range held {
		held[i] = reply(r).int(i) == 1
	}
	return held, nil
}
