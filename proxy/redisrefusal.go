package proxy

import (
	"sync"
	"time"
)

// A replica cut off from Redis (a partition of that replica alone) stays
// in the balancer within http.readiness_redis_grace and refuses the media
// sockets of calls another replica answered. Those refusals are the
// operator's first sign of the partition, and each leaves a call whose
// provider has hung up holding its pod: so each is logged (at most one
// line a second, with how many were not) and its call ended once Redis
// answers, as a socket's end is.

// refusalLog paces the log lines of refusals for want of Redis.
type refusalLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// refusalLogEvery is the least time between two such lines.
const refusalLogEvery = time.Second

// next reports whether a line is due now and how many refusals went
// unlogged since the last one.
func (l *refusalLog) next(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) < refusalLogEvery {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return true, n
}

// refusedForRedis logs a socket refused because Redis did not answer its
// claim, and queues its call's release.
func (p *Proxy) refusedForRedis(callID, pod string, err error) {
	if callID != "" {
		p.leases.ReleaseRefused(callID)
	}
	if ok, suppressed := p.redisRefusals.next(time.Now()); ok {
		p.log.Warn("media socket refused: Redis did not answer its claim; the call is ended once Redis answers unless another replica holds its socket",
			"call_sid", callID, "pod", pod, "reason", "redis_error", "err", err, "not_logged_since_last", suppressed)
	}
}
