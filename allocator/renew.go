package allocator

import (
	"context"
	"fmt"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// Lease names a call and the pod it holds, for Renew.
type Lease struct {
	CallID  string
	PodName string
	// Holder, when set, is the media claim (MediaLeases.Claim) the renewer
	// holds: the lease is renewed only while that claim holds the call, so
	// only the call's one admitted socket keeps it alive. "" renews without
	// checking.
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
	rs, err := a.renewSockets(ctx, leases)
	if err != nil {
		return nil, err
	}
	held = make([]bool, len(rs))
	for i, r := range rs {
		held[i] = r == mediacontract.RenewalHeld
	}
	return held, nil
}

// renewSockets is Renew for media sockets: a call whose pod left the
// registry while a socket that moves its call holds it (MarkResumable) is
// reported as mediacontract.RenewalPodGone, for that socket to move it
// (ResumeCall), rather than lost.
func (a *Allocator) renewSockets(ctx context.Context, leases []Lease) ([]mediacontract.Renewal, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	// Every batch is sent with the epoch known before the first: a batch
	// after the one that found Redis emptied must re-assert its calls too.
	known := a.tracked.knownEpoch()
	var epoch string
	var back, lost int
	held := make([]mediacontract.Renewal, 0, len(leases))
	for len(leases) > 0 {
		n := min(len(leases), RenewBatch)
		h, e, err := a.renewBatch(ctx, known, leases[:n], &back, &lost)
		if err != nil {
			return nil, err
		}
		epoch = e
		held = append(held, h...)
		leases = leases[n:]
	}
	if known != "" && epoch != "" && epoch != known {
		a.tracked.lost(known, epoch, back, lost)
	}
	return held, nil
}

func (a *Allocator) renewBatch(ctx context.Context, known string, leases []Lease, back, lost *int) ([]mediacontract.Renewal, string, error) {
	s := a.current.Load()
	keys := make([]string, len(leases))
	args := make([]any, 0, 7+8*len(leases))
	args = append(args, s.cfg.EffectiveLeaseTTL().Milliseconds(), s.cfg.CallInfoTTL.Milliseconds(),
		known, randomEpoch(), s.cfg.RecoveryHold.Milliseconds(), a.tracked.replicaName(), s.cfg.EndedTTL.Milliseconds())
	for i, l := range leases {
		keys[i] = a.keys.Call(l.CallID)
		// What re-asserting the call needs, should Redis have lost it:
		// known only for the sockets this replica admitted.
		c, _ := a.tracked.get(l.CallID)
		if c.pod != l.PodName {
			c = trackedCall{}
		}
		args = append(args, l.CallID, l.PodName, l.Holder, c.source, c.kind, c.merchant, c.creator, c.account)
	}
	r, err := a.run(ctx, "renew", keys, args...)
	if err != nil {
		return nil, "", fmt.Errorf("renew %d leases: %w", len(leases), err)
	}
	rep := reply(r)
	*back += int(rep.int(1))
	*lost += int(rep.int(2))
	held := make([]mediacontract.Renewal, len(leases))
	for i := range held {
		switch rep.int(i + 3) {
		case 1:
			held[i] = mediacontract.RenewalHeld
		case 2:
			held[i] = mediacontract.RenewalPodGone
		}
	}
	return held, rep.str(0), nil
}
