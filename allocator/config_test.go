package allocator_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
)

// A config reload (ApplyTTLs) and a tier refresh from Redis (ApplyTiers)
// each change only their part.
func TestApplyTTLsKeepsTiersAndApplyTiersKeepsTTLs(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"}) // never dialled
	defer rdb.Close()
	cfg := allocator.DefaultConfig()
	cfg.KeyPrefix = "{voice}:"
	a, err := allocator.New(rdb, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	fromRedis := allocator.TierConfig{
		Tiers:        map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 1}},
		DefaultChain: []string{"gold"},
	}
	a.ApplyTiers(fromRedis)

	reloaded := allocator.DefaultConfig() // the file's tiers and prefix must not win
	reloaded.KeyPrefix = "other:"
	reloaded.LeaseTTL = 45 * time.Second
	a.ApplyTTLs(reloaded)
	got := a.Config()
	if diff := cmp.Diff(fromRedis, got.Tiers); diff != "" {
		t.Errorf("tiers after ApplyTTLs (-want +got):\n%s", diff)
	}
	if got.LeaseTTL != 45*time.Second || got.KeyPrefix != "{voice}:" {
		t.Errorf("lease_ttl=%s key prefix=%q, want 45s and {voice}: (fixed at New)", got.LeaseTTL, got.KeyPrefix)
	}

	a.ApplyTiers(allocator.DefaultTiers())
	if got := a.Config(); got.LeaseTTL != 45*time.Second {
		t.Errorf("ApplyTiers changed lease_ttl to %s", got.LeaseTTL)
	}
}

func TestDefaultConfigIsValid(t *testing.T) {
	if err := allocator.DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
	if err := allocator.DefaultRedisConfig().Validate(); err != nil {
		t.Error(err)
	}
}
