package allocator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

func wantLimited(t *testing.T, err error, scope string) time.Duration {
	t.Helper()
	var rl *allocator.RateLimitedError
	if !errors.As(err, &rl) || rl.Scope != scope || !errors.Is(err, allocator.ErrRateLimited) {
		t.Fatalf("err = %v, want rate limited (%s)", err, scope)
	}
	return rl.RetryAfter
}

// Rate limits keep a merchant's or a source's burst from taking every pod. The
// token buckets live in Redis, so two replicas (two allocators on one
// Redis) share them, and the limit costs no round trip of its own.
func TestRateLimitsSharedAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	limits := func(c *allocator.Config) {
		c.Admission.Rate = allocator.RateConfig{MerchantPerSecond: 0.5, MerchantBurst: 2, SourcePerSecond: 0.5, SourceBurst: 3}
	}
	one, two := allocatortest.New(t, rdb, limits), allocatortest.New(t, rdb, limits)
	register(t, one, "standard", "s0", "s1", "s2", "s3", "s4", "s5")
	alloc := func(a *allocator.Allocator, call, merchant, source string) (allocator.Allocation, error) {
		return a.Allocate(ctx, allocator.Request{CallID: call, MerchantID: merchant, Creator: source})
	}

	if _, err := alloc(one, "A1", "acme", "provider:twilio"); err != nil {
		t.Fatal(err)
	}
	if _, err := alloc(two, "A2", "acme", "provider:plivo"); err != nil {
		t.Fatal(err)
	}
	_, err := alloc(one, "A3", "acme", "provider:exotel")
	if wait := wantLimited(t, err, "merchant"); wait <= 0 || wait > 2*time.Second {
		t.Fatalf("retry after %v, want within the 2s a token takes", wait)
	}
	// A repeat of a live call takes no token and is never limited.
	if al, err := alloc(two, "A1", "acme", "provider:twilio"); err != nil || !al.WasExisting {
		t.Fatalf("repeat of A1: %+v, %v", al, err)
	}
	// The source's bucket: twilio has one token left of 3, across merchants.
	if _, err := alloc(two, "B1", "bravo", "provider:twilio"); err != nil {
		t.Fatal(err)
	}
	if _, err := alloc(one, "C1", "charlie", "provider:twilio"); err != nil {
		t.Fatal(err)
	}
	_, err = alloc(two, "D1", "delta", "provider:twilio")
	wantLimited(t, err, "source")
	// A refused call wrote nothing but left its tokens: D1's merchant
	// bucket was not taken from.
	if rdb.Exists(ctx, one.Keys().Call("D1"), one.Keys().RateMerchant("delta")).Val() != 0 {
		t.Fatal("a limited allocation wrote call info or took the merchant's token")
	}
	// Calls without a merchant or a source are limited only by what they have.
	if _, err := alloc(one, "N1", "", ""); err != nil {
		t.Fatal(err)
	}
	// Buckets expire once full again: nothing is left behind for good.
	if ttl := rdb.PTTL(ctx, one.Keys().RateMerchant("acme")).Val(); ttl <= 0 || ttl > 6*time.Second {
		t.Fatalf("merchant bucket TTL %v, want the refill time plus a second", ttl)
	}
}

// No rates configured: nothing is limited and no bucket is written.
func TestRateLimitsOffByDefault(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	register(t, a, "standard", "s0", "s1")
	register(t, a, "basic", "b0")
	for _, c := range []string{"A1", "A2", "A3", "A4"} {
		if _, err := a.Allocate(ctx, allocator.Request{CallID: c, MerchantID: "acme", Creator: "provider:twilio"}); err != nil {
			t.Fatal(err)
		}
	}
	if keys := rdb.Keys(ctx, "voice:rate:*").Val(); len(keys) > 0 {
		t.Fatalf("bucket keys written with no limits: %v", keys)
	}
}

func TestAdmissionConfigValidation(t *testing.T) {
	for name, c := range map[string]struct {
		rate  allocator.RateConfig
		field string // "" valid
	}{
		"off":            {allocator.RateConfig{}, ""},
		"set":            {allocator.RateConfig{MerchantPerSecond: 5, MerchantBurst: 10, SourcePerSecond: 50}, ""},
		"negative rate":  {allocator.RateConfig{MerchantPerSecond: -1}, "admission.rate.merchant_per_second"},
		"absurd rate":    {allocator.RateConfig{SourcePerSecond: 1e9}, "admission.rate.source_per_second"},
		"negative burst": {allocator.RateConfig{MerchantPerSecond: 1, MerchantBurst: -2}, "admission.rate.merchant_burst"},
		"burst, no rate": {allocator.RateConfig{SourceBurst: 5}, "admission.rate.source_burst"},
	} {
		t.Run(name, func(t *testing.T) {
			err := allocator.AdmissionConfig{Rate: c.rate}.Validate()
			if (c.field == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.field)) {
				t.Fatalf("err = %v, want one naming %q", err, c.field)
			}
		})
	}
}

// A merchant's config may set its own rate (rate_per_second, rate_burst)
// in place of admission.rate.merchant_*: tighter or looser than the global
// one, or a limit where the global one is off; other merchants keep the
// global rate.
func TestMerchantRateOverride(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb, func(c *allocator.Config) {
		c.Admission.Rate = allocator.RateConfig{MerchantPerSecond: 0.01, MerchantBurst: 2}
	})
	register(t, a, "standard", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9")
	rate, burst, one := 0.01, 4, 1
	setMerchant(t, a, "loose", allocator.MerchantConfig{RatePerSecond: &rate, RateBurst: &burst})
	setMerchant(t, a, "tight", allocator.MerchantConfig{RatePerSecond: &rate, RateBurst: &one})
	started := map[string]int{}
	for _, m := range []string{"loose", "tight", "global"} {
		for i := range 5 {
			_, err := a.Allocate(ctx, allocator.Request{CallID: m + "-" + string(rune('0'+i)), MerchantID: m})
			if err == nil {
				started[m]++
				continue
			}
			wantLimited(t, err, "merchant")
		}
	}
	if started["loose"] != 4 || started["tight"] != 1 || started["global"] != 2 {
		t.Errorf("calls started %v, want loose 4 (its burst), tight 1, global 2 (admission.rate)", started)
	}

	// Global rate off: the override alone limits.
	b := allocatortest.New(t, rdb)
	setMerchant(t, b, "solo", allocator.MerchantConfig{RatePerSecond: &rate})
	if _, err := b.Allocate(ctx, allocator.Request{CallID: "solo-1", MerchantID: "solo"}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Allocate(ctx, allocator.Request{CallID: "solo-2", MerchantID: "solo"})
	wantLimited(t, err, "merchant")

	// A value written by hand that the admin API would refuse keeps the
	// global rate, with a note in the allocation's warning.
	rdb.HSet(ctx, a.Keys().MerchantConfig(), "typo", `{"rate_per_second":"fast"}`)
	al, err := a.Allocate(ctx, allocator.Request{CallID: "typo-1", MerchantID: "typo"})
	if err != nil || !strings.Contains(al.Warning, "rate_per_second") {
		t.Errorf("hand-written bad rate: %+v %v, want allocated with a warning", al, err)
	}
}

func TestMerchantRateOverrideValidation(t *testing.T) {
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	f := func(v float64) *float64 { return &v }
	for name, tc := range map[string]struct {
		mc   allocator.MerchantConfig
		want string
	}{
		"zero rate":          {allocator.MerchantConfig{RatePerSecond: f(0)}, "rate_per_second"},
		"negative rate":      {allocator.MerchantConfig{RatePerSecond: f(-1)}, "rate_per_second"},
		"absurd rate":        {allocator.MerchantConfig{RatePerSecond: f(1e9)}, "rate_per_second"},
		"zero burst":         {allocator.MerchantConfig{RatePerSecond: f(1), RateBurst: capOf(0)}, "rate_burst"},
		"absurd burst":       {allocator.MerchantConfig{RatePerSecond: f(1), RateBurst: capOf(1 << 30)}, "rate_burst"},
		"burst without rate": {allocator.MerchantConfig{RateBurst: capOf(5)}, "rate_burst: needs rate_per_second"},
	} {
		t.Run(name, func(t *testing.T) {
			err := a.SetMerchantConfig(context.Background(), "acme", tc.mc)
			if !errors.Is(err, allocator.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig naming %s", err, tc.want)
			}
		})
	}
	if err := a.SetMerchantConfig(context.Background(), "acme", allocator.MerchantConfig{RatePerSecond: f(2.5), RateBurst: capOf(10)}); err != nil {
		t.Fatalf("valid override refused: %v", err)
	}
}
