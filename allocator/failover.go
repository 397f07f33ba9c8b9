package allocator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// Passive pod health and connect-time failover (docs/media.md): a pod the media
// proxy cannot reach is ejected from allocation on every replica, and the
// call whose socket failed moves to another pod of its chain, both in one
// script.

// ErrNoOtherPod: the call's chain has no pod left to move it to.
var ErrNoOtherPod = errors.New("no other pod in the call's chain")

// Ejection is how failed pods are taken out of allocation (see
// mediacontract): the probe backoff starts at Backoff and doubles with
// every consecutive failure up to MaxBackoff; at most MaxPercent percent of
// a tier's pods are ejected at once (Envoy's max_ejection_percent).
type Ejection = mediacontract.Ejection

// EjectedPod is an ejected pod and when its next probe is due.
type EjectedPod = mediacontract.EjectedPod

func ejectionArgs(e Ejection) []any {
	return []any{max(e.Backoff.Milliseconds(), 1), max(e.MaxBackoff.Milliseconds(), 1), e.MaxPercent}
}

// Failover is the outcome of moving a call off a pod it could not reach.
type Failover struct {
	// Pod is where the call is now.
	Pod string
	// Ejected: the broken pod is out of allocation until ProbeDue (and a
	// probe then succeeds); false when its tier is at MaxPercent.
	Ejected  bool
	ProbeDue time.Time
}

// ResumeCall is a move (moveCall) for a call whose pod died while holder's socket
// relayed it: the socket goes on with the new pod, and the call's record
// counts the move (CallTimeline.Resumptions, ResumedAt). With blame, the
// pod's failure is recorded as "lost"; without, nothing of the pod is
// (the instance that died is not the one its name stands for now).
func (a *Allocator) ResumeCall(ctx context.Context, callID, pod, holder string, ej Ejection, blame bool) (Failover, error) {
	mode := moveMidCallSpared
	if blame {
		mode = moveMidCall
	}
	return a.moveCall(ctx, callID, pod, holder, "lost", ej, mode)
}

// Kinds of move, move_call.lua's ARGV[9].
const (
	moveConnect       = "0" // a failed connect: the pod blamed
	moveMidCall       = "1" // the pod died mid-call: blamed, the move counted
	moveMidCallSpared = "2" // mid-call, the instance gone: counted, nobody blamed
)

// moveCall moves callID off pod, which holder's socket could not reach for
// reason (mode moveConnect: MediaLeases.MoveCall), or whose pod died under
// it (ResumeCall), to another pod of the call's chain, in one round trip:
// the pod's failure recorded (and the pod ejected) as mode says, the call
// info, lease and pod owner moved, the media claim kept. ErrCallNotFound
// when the call is not on pod any more, ErrMediaClaimed when holder does
// not hold its claim, ErrNoOtherPod (with the failure still recorded) when
// the chain has no other pod.
func (a *Allocator) moveCall(ctx context.Context, callID, pod, holder, reason string, ej Ejection, mode string) (Failover, error) {
	if err := ValidateID("call_sid", callID); err != nil {
		return Failover{}, err
	}
	if err := ValidateID("pod_name", pod); err != nil {
		return Failover{}, err
	}
	s := a.current.Load()
	args := append([]any{callID, pod, holder, reason, s.cfg.LeaseTTL.Milliseconds()}, ejectionArgs(ej)...)
	args = append(args, mode)
	args = append(args, s.tierArgs...)
	args = append(args, staleAfter(ctx)) // last, after the chain
	r, err := a.run(ctx, "move_call", []string{a.keys.Call(callID)}, args...)
	if err != nil {
		return Failover{}, fmt.Errorf("move call %s off %s: %w", callID, pod, err)
	}
	rep := reply(r)
	switch rep.str(0) {
	case "moved":
		a.tracked.moved(callID, rep.str(1))
		return Failover{Pod: rep.str(1), Ejected: rep.int(2) == 1, ProbeDue: time.UnixMilli(rep.int(3))}, nil
	case "none":
		return Failover{Pod: pod, Ejected: rep.int(1) == 1, ProbeDue: time.UnixMilli(rep.int(2))},
			fmt.Errorf("move call %s off %s: %w", callID, pod, ErrNoOtherPod)
	case "gone":
		return Failover{}, fmt.Errorf("move call %s off %s: it is on %q: %w", callID, pod, rep.str(1), ErrCallNotFound)
	case "held":
		return Failover{}, fmt.Errorf("move call %s off %s: %w", callID, pod, ErrMediaClaimed)
	case "stale":
		return Failover{}, fmt.Errorf("move call %s off %s: %w", callID, pod, errStale)
	default:
		return Failover{}, fmt.Errorf("move call %s off %s: unexpected script reply %v", callID, pod, r)
	}
}

// podFailed records a failed dial, a pod lost mid-call or a failed probe,
// and ejects the pod unless its tier is at ej.MaxPercent. It reports
// whether the pod is ejected and when its next probe is due.
func (a *Allocator) podFailed(ctx context.Context, pod, reason string, ej Ejection) (bool, time.Time, error) {
	if err := ValidateID("pod_name", pod); err != nil {
		return false, time.Time{}, err
	}
	r, err := a.run(ctx, "pod_failure", nil, append([]any{pod, reason}, ejectionArgs(ej)...)...)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("record failure of pod %s: %w", pod, err)
	}
	rep := reply(r)
	return rep.int(0) == 1, time.UnixMilli(rep.int(1)), nil
}

// reinstate takes pod back into allocation after a successful probe and
// resets its failure count; it reports whether the pod was ejected.
func (a *Allocator) reinstate(ctx context.Context, pod string) (bool, error) {
	if err := ValidateID("pod_name", pod); err != nil {
		return false, err
	}
	r, err := a.run(ctx, "reinstate", nil, pod)
	if err != nil {
		return false, fmt.Errorf("reinstate pod %s: %w", pod, err)
	}
	return reply(r).int(0) == 1, nil
}

// Ejected lists the ejected pods (one read; the set is bounded by
// MaxPercent of the pods).
func (a *Allocator) Ejected(ctx context.Context) ([]EjectedPod, error) {
	zs, err := a.rdb.ZRangeWithScores(ctx, a.keys.Ejected(), 0, -1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read ejected pods: %w", unavailable(err))
	}
	out := make([]EjectedPod, 0, len(zs))
	for _, z := range zs {
		name, _ := z.Member.(string)
		out = append(out, EjectedPod{Pod: name, ProbeDue: time.UnixMilli(int64(z.Score))})
	}
	return out, nil
}

// parseMillis reads a unix-milliseconds field ("" or junk: the zero time).
func parseMillis(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// MarkResumable marks the call as one holder's media socket moves to
// another pod when its pod dies or leaves the registry (the proxy's
// proxy.resume): UnregisterPod then leaves the call to the socket
// (renewSockets reports it RenewalPodGone) instead of ending it. It
// reports false when holder does not hold the call's media claim.
func (a *Allocator) MarkResumable(ctx context.Context, callID, holder string) (bool, error) {
	if err := ValidateID("call_sid", callID); err != nil {
		return false, err
	}
	r, err := a.run(ctx, "resumable", []string{a.keys.Call(callID)}, holder)
	if err != nil {
		return false, fmt.Errorf("mark %s resumable: %w", callID, err)
	}
	return reply(r).int(0) == 1, nil
}
