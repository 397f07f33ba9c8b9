package relay

import (
	"errors"
	"sync/atomic"
)

// ErrPodHung: the pod answered nothing, not even edge's ping, for
// proxy.pod_silence.
var ErrPodHung = errors.New("pod answered nothing, not even a ping")

// Liveness is how a relay finds a pod that hangs (a stopped process, an
// agent whose event loop is blocked): its socket stays open and the
// kernel keeps taking bytes for minutes, so nothing but an answer says it
// lives. Whenever the pod has sent nothing for the ping interval, edge
// sends it a ping (wsproto.PingFrame) at the client direction's next frame
// boundary; any byte from the pod, its pong or anything else, is an
// answer. A pod silent for the silence bound (longer than the interval)
// with a ping unanswered is the pod's loss, as its reset would be: the
// caller hears that much silence. A pod that streams its own audio is
// never pinged.
//
// The times are the relay's clock (nanoseconds). The fields are atomic:
// in the goroutine relay the pod's reader hears, the client's writer pings
// and the pod's reader checks; a loop does all three.
type Liveness struct {
	interval, silence int64 // 0: off
	// heard is when the pod last sent anything, pinged when edge's last
	// ping went out (0: none yet).
	heard, pinged atomic.Int64
	// due: a ping is asked for and has not gone out yet.
	due atomic.Bool
}

func (lv *Liveness) init(interval, silence, now int64) {
	lv.interval, lv.silence = interval, silence
	lv.heard.Store(now)
	lv.pinged.Store(0)
	lv.due.Store(false)
}

// On reports whether the pod is pinged at all.
func (lv *Liveness) On() bool { return lv.interval > 0 }

// Heard records bytes from the pod at now.
func (lv *Liveness) Heard(now int64) {
	if lv.heard.Load() < now {
		lv.heard.Store(now)
	}
}

// Check says what the pod's silence means at now: hung, it has sent
// nothing for the silence bound and a ping is unanswered; ping, a ping
// should go out
// (the pod has been quiet for the interval and no ping waits for its
// answer). next is when the answer may change, for a relay's timer.
func (lv *Liveness) Check(now int64) (ping, hung bool, next int64) {
	if lv.interval <= 0 {
		return false, false, 0
	}
	heard, pinged := lv.heard.Load(), lv.pinged.Load()
	if pinged > heard {
		if now-heard >= lv.silence {
			return false, true, now
		}
		return false, false, heard + lv.silence
	}
	if lv.due.Load() {
		return false, false, now + lv.interval
	}
	if now-heard >= lv.interval {
		lv.due.Store(true)
		return true, false, now + lv.interval
	}
	return false, false, heard + lv.interval
}

// PingedAt is when edge's last ping went out (0: none yet).
func (lv *Liveness) PingedAt() int64 { return lv.pinged.Load() }

// Due reports whether a ping is asked for and has not gone out.
func (lv *Liveness) Due() bool { return lv.due.Load() }

// Pinged records that edge's ping goes out at now: called before it is
// written, since the pod's answer may be read before the write returns.
func (lv *Liveness) Pinged(now int64) {
	lv.pinged.Store(now)
	lv.due.Store(false)
}

// Reset starts the pod's clock afresh at now: a new pod (the socket
// moved), which has not been asked anything yet.
func (lv *Liveness) Reset(now int64) { lv.init(lv.interval, lv.silence, now) }
