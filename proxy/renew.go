package proxy

import (
	"context"
	"time"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// renewLoop renews the leases of every open socket once per interval, in
// one batch (one Redis round trip per replica, not one per socket), and
// stops the sockets whose call lost its pod. A Redis error closes nothing:
// an outage must not hang up live calls; the next tick tries again, and the
// lease TTL is at least twice the interval (config validation).
func (p *Proxy) renewLoop(ctx context.Context) {
	every(ctx, func() time.Duration { return p.cfg().RenewInterval }, p.renewOnce)
}

// every runs f after each interval() until ctx ends: the renewals' and
// the probes' loop. The interval is read each time, so that a reload
// applies to the next one.
func every(ctx context.Context, interval func() time.Duration, f func(context.Context)) {
	for {
		t := time.NewTimer(interval())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		f(ctx)
	}
}

// owedTimeout bounds the Redis work a socket owes once nobody waits for
// it (its release, a claim dropped, a pod's failure recorded): off the
// caller's deadline, and never for ever.
const owedTimeout = 5 * time.Second

// owedContext is the context of such work.
func owedContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), owedTimeout)
}

func (p *Proxy) renewOnce(ctx context.Context) {
	open, _ := p.snapshot()
	if len(open) == 0 {
		return
	}
	leases := make([]mediacontract.Lease, len(open))
	for i, s := range open {
		leases[i] = mediacontract.Lease{CallID: s.CallID, Pod: s.podName(), Holder: s.holder}
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg().RenewInterval)
	defer cancel()
	renewed, err := p.leases.Renew(rctx, leases)
	if err != nil {
		p.metrics.renewals.WithLabelValues("error").Add(float64(len(leases)))
		p.log.Warn("lease renewal failed; retrying next interval", "sockets", len(leases), "err", err)
		return
	}
	var lost int
	for i, s := range open {
		r := mediacontract.RenewalLost
		if i < len(renewed) {
			r = renewed[i]
		}
		if r == mediacontract.RenewalHeld {
			continue
		}
		if s.Resuming() || s.podName() != leases[i].Pod {
			// The socket is moving, or moved since the batch was read:
			// its call left that pod, for the one the move holds.
			continue
		}
		if r == mediacontract.RenewalPodGone && p.podLeft(s) {
			continue
		}
		lost++
		p.log.Info("call lost its pod: closing its media socket", s.attrs()...)
		s.Stop(closePolicy, reasonCallReleased)
	}
	p.metrics.renewals.WithLabelValues("held").Add(float64(len(leases) - lost))
	if lost > 0 {
		p.metrics.renewals.WithLabelValues("lost").Add(float64(lost))
	}
}
