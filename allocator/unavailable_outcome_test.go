package allocator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// An allocation Redis could not serve was counted as result "error", with
// script errors and bugs. Redis down (refused, timed out, held BUSY by a
// script, refusing writes on a failed save or out of memory) is its own
// result: redis_unavailable, and the error says so (ErrUnavailable).
func TestRedisUnavailableIsItsOwnOutcome(t *testing.T) {
	srv := testredis.Start(t)
	opts := srv.Options()
	opts.MaxRetries, opts.DialTimeout, opts.ReadTimeout = -1, 200*time.Millisecond, 200*time.Millisecond
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	a, err := allocator.New(rdb, allocator.Config{LeaseTTL: time.Minute, CallInfoTTL: time.Hour, DrainingTTL: time.Minute, Tiers: allocatortest.Tiers()}, reg)
	if err != nil {
		t.Fatal(err)
	}
	register(t, a, "gold", "g0")
	ctx := context.Background()
	srv.Stop()
	_, err = a.Allocate(ctx, allocator.Request{CallID: "CA-down"})
	if !errors.Is(err, allocator.ErrUnavailable) {
		t.Fatalf("allocate with Redis down: %v, want ErrUnavailable", err)
	}
	if n := counterValue(t, reg, "allocations_total", "result", "redis_unavailable"); n != 1 {
		t.Errorf("allocations_total{result=\"redis_unavailable\"} = %v, want 1", n)
	}
	if n := counterValue(t, reg, "allocations_total", "result", "error"); n != 0 {
		t.Errorf("allocations_total{result=\"error\"} = %v, want 0", n)
	}
}
