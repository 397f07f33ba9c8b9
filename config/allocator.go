package config

import (
	"errors"
	"fmt"
	"time"
)

// Allocator holds the lifetimes of an allocation's Redis state.
type Allocator struct {
	// LeaseTTL is how long an allocation stays alive without a renewal. The
	// proxy renews it while the media socket is open, so it only bounds how
	// long a dead call holds its pod. Default 60s.
	LeaseTTL time.Duration `koanf:"lease_ttl"`
	// CallInfoTTL is how long a call's info (pod, pool) is kept, for
	// idempotent retries of allocate and for release. Default 1h.
	CallInfoTTL time.Duration `koanf:"call_info_ttl"`
	// DrainingTTL is how long a pod's draining flag lives; it outlasts the
	// pod's preStop window. Default 6m.
	DrainingTTL time.Duration `koanf:"draining_ttl"`
	// RenewInterval is how often a live socket renews its lease; it must be
	// below LeaseTTL/2 so that one lost renewal does not end a call.
	// Default 20s.
	RenewInterval time.Duration `koanf:"renew_interval"`
}

func defaultAllocator() Allocator {
	return Allocator{
		LeaseTTL:      60 * time.Second,
		CallInfoTTL:   time.Hour,
		DrainingTTL:   6 * time.Minute,
		RenewInterval: 20 * time.Second,
	}
}

// Validate checks every TTL is positive and renewals come often enough.
func (a Allocator) Validate() error {
	errs := []error{
		positive("allocator.lease_ttl", a.LeaseTTL),
		positive("allocator.call_info_ttl", a.CallInfoTTL),
		positive("allocator.draining_ttl", a.DrainingTTL),
		positive("allocator.renew_interval", a.RenewInterval),
	}
	if a.LeaseTTL > 0 && a.RenewInterval > 0 && a.RenewInterval >= a.LeaseTTL/2 {
		errs = append(errs, invalid("allocator.renew_interval", a.RenewInterval,
			fmt.Sprintf("must be < allocator.lease_ttl/2 = %s", a.LeaseTTL/2)))
	}
	if a.CallInfoTTL > 0 && a.LeaseTTL > 0 && a.CallInfoTTL < a.LeaseTTL {
		// Call info outliving the lease is what makes release after a
		// renewal gap find the call.
		errs = append(errs, invalid("allocator.call_info_ttl", a.CallInfoTTL,
			fmt.Sprintf("must be >= allocator.lease_ttl (%s)", a.LeaseTTL)))
	}
	return errors.Join(errs...)
}
