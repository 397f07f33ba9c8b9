package allocator

import (
	"context"
	"fmt"
)

// Lease names a call and the pod it holds, for Renew.
type Lease struct {
	CallID  string
	PodName string
}

// Renew extends the leases of a batch of calls in one round trip, each only if
// the call still owns its pod. held[i] reports whether leases[i] was renewed;
// false means the call lost its pod (released, swept or the pod removed) and
// its media should stop.
func (a *Allocator) Renew(ctx context.Context, leases []Lease) (held []bool, err error) {
	if len(leases) == 0 {
		return nil, nil
	}
	s := a.current.Load()
	keys := make([]string, len(leases))
	args := make([]any, 0, 2+2*len(leases))
	args = append(args, s.cfg.LeaseTTL.Milliseconds(), s.cfg.CallInfoTTL.Milliseconds())
	for i, l := range leases {
		keys[i] = a.keys.Call(l.CallID)
		args = append(args, l.CallID, l.PodName)
	}
	r, err := a.run(ctx, "renew", keys, args...)
	if err != nil {
		return nil, fmt.Errorf("renew %d leases: %w", len(leases), err)
	}
	held = make([]bool, len(leases))
	for i := range held {
		held[i] = reply(r).int(i) == 1
	}
	return held, nil
}
