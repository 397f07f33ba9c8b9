package allocator

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/edge-voice/edge/internal/confcheck"
)

// AdmissionConfig is edge's admission section (keys admission.*; see
// docs/admission.md): what allocate.lua checks, besides the pods, before it
// gives a call a pod. Per-merchant caps live in the merchant config
// (MerchantConfig.MaxCalls), not here: they differ per merchant and change
// through the admin API.
type AdmissionConfig struct {
	Rate   RateConfig   `koanf:"rate"`
	Wait   WaitConfig   `koanf:"wait"`
	Demand DemandConfig `koanf:"demand"`
}

// DemandConfig bounds what refused calls add to the demand signal
// (admission.demand.*, demand.go), so that no caller can move the
// autoscaler past what admission would admit: a merchant's refused calls
// count up to its max_calls less its live calls, and these up to
// UncappedCalls.
type DemandConfig struct {
	// UncappedCalls is how many refused calls count at most for one
	// merchant without max_calls, and for all the calls whose merchant has
	// no config (or that name none) together: a caller may make up
	// merchant ids, never configs. 0: DefaultUncappedCalls.
	UncappedCalls int `koanf:"uncapped_calls"`
}

// DefaultUncappedCalls is admission.demand.uncapped_calls' default: a few
// pods' worth of shortage per merchant, seen at once; what is admitted
// then counts as live calls, so a real rush keeps the signal climbing.
const DefaultUncappedCalls = 20

// uncappedCalls is UncappedCalls in effect.
func (d DemandConfig) uncappedCalls() int {
	if d.UncappedCalls <= 0 {
		return DefaultUncappedCalls
	}
	return d.UncappedCalls
}

// WaitConfig lets a call that finds every pod of its chain busy wait a
// little for one to be released (admission.wait.*, wait.go),
// served fairly across merchants and in order within one. Only
// at_capacity waits: no_pods and all_draining cannot be helped by a
// release, merchant_at_cap and rate_limited are policy.
type WaitConfig struct {
	// Budget is how long a call may wait, within the provider's webhook
	// budget (Twilio's is 15 s) and the request's own deadline
	// (http.request_timeout). 0: no waiting. DefaultAdmissionConfig: 3s.
	Budget time.Duration `koanf:"budget"`
	// MaxWaiters bounds the calls waiting on this replica at once; a call
	// beyond it is refused at once. 0: DefaultMaxWaiters.
	MaxWaiters int `koanf:"max_waiters"`
}

// Bounds of admission.wait: past them a wait no provider would sit through,
// or more goroutines than a replica should hold for it.
const (
	MaxWaitBudget     = 10 * time.Second
	DefaultMaxWaiters = 1000
	maxMaxWaiters     = 100_000
)

// DefaultAdmissionConfig is admission's defaults: no rate limits, a 3 s
// wait for capacity, DefaultUncappedCalls.
func DefaultAdmissionConfig() AdmissionConfig {
	return AdmissionConfig{
		Wait:   WaitConfig{Budget: 3 * time.Second, MaxWaiters: DefaultMaxWaiters},
		Demand: DemandConfig{UncappedCalls: DefaultUncappedCalls},
	}
}

// maxWaiters is MaxWaiters in effect.
func (w WaitConfig) maxWaiters() int {
	if w.MaxWaiters <= 0 {
		return DefaultMaxWaiters
	}
	return w.MaxWaiters
}

// RateConfig limits how fast new calls are admitted, per merchant and per
// source (the creator: "provider:twilio", "token:<name>"), shared by every
// replica: the token buckets live in Redis (K.RateBucket) and are taken in
// the allocate script, with no extra round trip. A repeat of a live call
// takes no token. Zero rates are off (the default).
type RateConfig struct {
	// MerchantPerSecond is the new calls one merchant may start per second
	// on average. 0: no limit.
	MerchantPerSecond float64 `koanf:"merchant_per_second"`
	// MerchantBurst is how many a merchant may start at once after a quiet
	// spell. 0: max(1, MerchantPerSecond).
	MerchantBurst int `koanf:"merchant_burst"`
	// SourcePerSecond and SourceBurst do the same per source.
	SourcePerSecond float64 `koanf:"source_per_second"`
	SourceBurst     int     `koanf:"source_burst"`
}

// Bounds past which a rate or burst is a typo, not a plan.
const (
	maxRatePerSecond = 100_000
	maxRateBurst     = 1_000_000
)

// Validate names the field of every bad value.
func (c AdmissionConfig) Validate() error {
	var errs []error
	check := func(key string, rate float64, burst int) {
		if math.IsNaN(rate) || rate < 0 || rate > maxRatePerSecond {
			errs = append(errs, confcheck.Invalid("admission.rate."+key+"_per_second", rate,
				fmt.Sprintf("must be between 0 (off) and %d", maxRatePerSecond)))
		}
		if burst < 0 || burst > maxRateBurst {
			errs = append(errs, confcheck.Invalid("admission.rate."+key+"_burst", burst,
				fmt.Sprintf("must be between 0 (the rate, at least 1) and %d", maxRateBurst)))
		}
		if burst > 0 && rate == 0 {
			errs = append(errs, confcheck.Invalid("admission.rate."+key+"_burst", burst,
				"needs admission.rate."+key+"_per_second"))
		}
	}
	check("merchant", c.Rate.MerchantPerSecond, c.Rate.MerchantBurst)
	check("source", c.Rate.SourcePerSecond, c.Rate.SourceBurst)
	if b := c.Wait.Budget; b < 0 || b > MaxWaitBudget {
		errs = append(errs, confcheck.Invalid("admission.wait.budget", b,
			fmt.Sprintf("must be between 0 (no waiting) and %s", MaxWaitBudget)))
	}
	if n := c.Demand.UncappedCalls; n < 0 || n > maxRateBurst {
		errs = append(errs, confcheck.Invalid("admission.demand.uncapped_calls", n,
			fmt.Sprintf("must be between 0 (the default, %d) and %d", DefaultUncappedCalls, maxRateBurst)))
	}
	if n := c.Wait.MaxWaiters; n < 0 || n > maxMaxWaiters {
		errs = append(errs, confcheck.Invalid("admission.wait.max_waiters", n,
			fmt.Sprintf("must be between 0 (the default, %d) and %d", DefaultMaxWaiters, maxMaxWaiters)))
	}
	return errors.Join(errs...)
}

// burstOf is the bucket size in effect: burst, or the rate rounded up.
func burstOf(rate float64, burst int) int {
	if burst > 0 {
		return burst
	}
	return max(1, int(math.Ceil(rate)))
}

// rateArgs lays the buckets out for allocate.lua: merchant rate, burst,
// source rate, burst (rates per second; 0 off).
func (c AdmissionConfig) rateArgs() []any {
	r := c.Rate
	return []any{r.MerchantPerSecond, burstOf(r.MerchantPerSecond, r.MerchantBurst),
		r.SourcePerSecond, burstOf(r.SourcePerSecond, r.SourceBurst)}
}

// ErrRateLimited: the merchant or the source started calls faster than its
// rate allows. The error is a *RateLimitedError that says which and when
// to retry.
var ErrRateLimited = errors.New("rate limited")

// RateLimitedError is the ErrRateLimited outcome.
type RateLimitedError struct {
	// Scope is "merchant" or "source".
	Scope string
	// RetryAfter is when the bucket holds a token again.
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("rate limited (%s), retry after %s", e.Scope, e.RetryAfter)
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// ReasonRateLimited labels allocations refused with ErrRateLimited (the
// allocations metric's result).
const ReasonRateLimited Reason = "rate_limited"
