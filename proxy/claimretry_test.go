package proxy

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// flakyClaims answers the first fails claims as a Redis in failover does
// (neither "no allocation" nor "claimed": Redis did not answer).
type flakyClaims struct {
	Leases
	fails atomic.Int32
}

func (f *flakyClaims) Claim(ctx context.Context, callID, pod, holder string) (mediacontract.Claimed, error) {
	if f.fails.Add(-1) >= 0 {
		return mediacontract.Claimed{}, errors.New("redis script claim: redis unavailable: connection refused")
	}
	return f.Leases.Claim(ctx, callID, pod, holder)
}

// A provider's media socket that arrives while Redis fails over (its
// claim gets no answer for a moment) is admitted once Redis answers,
// within the connect budget, instead of being refused with 503: the
// provider opens the stream once.
func TestClaimWaitsOutARedisFailover(t *testing.T) {
	flaky := &flakyClaims{}
	flaky.fails.Store(3)
	e := newEnv(t, envOpt{leases: func(l Leases) Leases { flaky.Leases = l; return flaky }})
	_, url := e.allocate("CA-failover", "")
	c, err := e.dial(url)
	if err != nil {
		t.Fatalf("media socket during a Redis failover: %v", err)
	}
	defer c.Close(websocket.StatusNormalClosure, "")
	if n := flaky.fails.Load(); n >= 0 {
		t.Fatalf("the claim was asked %d times fewer than the failover lasted", n+1)
	}
}
