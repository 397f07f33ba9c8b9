package proxy

import (
	"context"
	"crypto/rand"
	"net/http"
	"time"

	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// probeLoop brings ejected pods back: every
// ProbeInterval it reads the ejected pods (shared by every replica) and
// probes each one whose backoff has passed: a TCP connect, then a WebSocket
// upgrade to HealthPath. A 101 takes the pod back into allocation on every
// replica; a failure doubles its backoff. Every replica probes, so a pod
// comes back even with one replica left; a probe is one short connection
// per backoff per replica.
func (p *Proxy) probeLoop(ctx context.Context) {
	every(ctx, func() time.Duration { return p.cfg().ProbeInterval }, p.probeDue)
}

// probeDue probes the ejected pods whose probe time has come, one after
// another (there are few: at most max_ejection_percent of a tier).
func (p *Proxy) probeDue(ctx context.Context) {
	cfg := p.cfg()
	rctx, cancel := context.WithTimeout(ctx, cfg.ProbeInterval+cfg.DialTimeout)
	defer cancel()
	pods, err := p.leases.Ejected(rctx)
	if err != nil {
		p.log.Debug("reading ejected pods failed; probing next interval", "err", err)
		return
	}
	now := time.Now()
	for _, ep := range pods {
		if ep.ProbeDue.After(now) || ctx.Err() != nil {
			continue
		}
		addr, ok := p.lookup(ep.Pod)
		if !ok {
			// Not in the registry: the pod source removes it, and its
			// ejection with it.
			continue
		}
		if err := probe(ctx, addr, cfg.HealthPath, cfg.DialTimeout); err != nil {
			p.metrics.probes.WithLabelValues("failed").Inc()
			p.log.Info("ejected pod's health probe failed", "pod", ep.Pod, "address", addr, "err", err)
			p.probeFailed(ep.Pod)
			continue
		}
		p.metrics.probes.WithLabelValues("ok").Inc()
		if was, err := p.leases.Reinstate(rctx, ep.Pod); err != nil {
			p.log.Warn("reinstating a healthy pod failed; probing again", "pod", ep.Pod, "err", err)
		} else if was {
			p.log.Warn("ejected pod passed its health probe: back in allocation", "pod", ep.Pod, "address", addr)
		}
	}
}

// probeFailed grows an ejected pod's backoff; it was ejected already, so
// no WARN and no ejection counted.
func (p *Proxy) probeFailed(pod string) {
	ctx, cancel := owedContext()
	defer cancel()
	if _, err := p.leases.PodFailed(ctx, pod, "probe", p.cfg().ejection()); err != nil {
		p.log.Warn("recording a failed probe failed", "pod", pod, "err", err)
	}
}

// probe opens a WebSocket to addr's path and closes it at once (close 1000):
// what a media socket needs of the pod, without a call.
func probe(ctx context.Context, addr, path string, timeout time.Duration) error {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	up, err := dialUpstream(dctx, addr, path, wsproto.NewKey(), http.Header{"User-Agent": {"edge-health-probe"}})
	if err != nil {
		return err
	}
	defer up.conn.Close()
	up.conn.SetWriteDeadline(time.Now().Add(timeout))
	mask := [4]byte{}
	rand.Read(mask[:])
	up.conn.Write(wsproto.CloseFrame(wsproto.CloseNormal, "edge health probe", &mask))
	return nil
}
