package providers_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A Redis held by a long script answers BUSY: the webhook was counted
// outcome="internal", as if edge had a bug, and an outage was hidden among
// them. Redis unavailable is its own outcome, redis_unavailable, and the
// answer is the one for the number's fallback URL.
func TestRedisBusyIsRedisUnavailable(t *testing.T) {
	e := fallbackEnv(t)
	ctx := context.Background()
	admin := redis.NewClient(e.redis.Options())
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "busy-reply-threshold", "50").Err(); err != nil {
		t.Fatal(err)
	}
	busy := redis.NewClient(e.redis.Options())
	defer busy.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		busy.Eval(ctx, "while true do end", nil)
	}()
	defer func() {
		for {
			err := admin.ScriptKill(ctx).Err()
			if err == nil || redis.HasErrorPrefix(err, "NOTBUSY") {
				break
			}
		}
		<-done
	}()
	for {
		if err := admin.Ping(ctx).Err(); err != nil && redis.HasErrorPrefix(err, "BUSY") {
			break
		}
	}
	if got := webhooks[0].send(t, e, 40); got.status != 503 {
		t.Errorf("twilio with Redis busy: %+v, want 503", got)
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "redis_unavailable"); n != 1 {
		t.Errorf("redis_unavailable outcomes = %v, want 1", n)
	}
	if n := metric(t, e, "edge_provider_webhooks_total", "provider", "twilio", "outcome", "internal"); n != 0 {
		t.Errorf("internal outcomes = %v, want 0", n)
	}
}
