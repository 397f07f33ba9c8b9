package config

import (
	"errors"
	"strings"
	"time"
)

// Pool holds the periods of the leader's pool loops.
type Pool struct {
	// ZombieSweepInterval is how often assigned pods with no live lease go
	// back to their pools. Default 30s.
	ZombieSweepInterval time.Duration `koanf:"zombie_sweep_interval"`
	// ReconcileInterval is how often the full Kubernetes-to-Redis diff
	// runs, on top of the informer's events. Default 60s.
	ReconcileInterval time.Duration `koanf:"reconcile_interval"`
	// TierConfigRefresh is how often every replica re-reads
	// voice:tier:config, which operators may change at runtime. Default 30s.
	TierConfigRefresh time.Duration `koanf:"tier_config_refresh"`
}

func defaultPool() Pool {
	return Pool{
		ZombieSweepInterval: 30 * time.Second,
		ReconcileInterval:   60 * time.Second,
		TierConfigRefresh:   30 * time.Second,
	}
}

// Validate checks every period is positive.
func (p Pool) Validate() error {
	return errors.Join(
		positive("pool.zombie_sweep_interval", p.ZombieSweepInterval),
		positive("pool.reconcile_interval", p.ReconcileInterval),
		positive("pool.tier_config_refresh", p.TierConfigRefresh),
	)
}

// Leader configures leader election on a Kubernetes Lease (restart: the
// elector is built once). With the static pod source a single replica
// leads without a Lease.
type Leader struct {
	// LeaseName is the coordination.k8s.io Lease object. Default
	// "edge-leader".
	LeaseName string `koanf:"lease_name"`
	// Identity names this replica in the Lease. Empty (the default): the
	// host name, which in Kubernetes is the pod name.
	Identity string `koanf:"identity"`
	// LeaseDuration is how long followers wait before taking over a Lease
	// that was not renewed. Default 15s.
	LeaseDuration time.Duration `koanf:"lease_duration"`
	// RenewDeadline is how long the leader keeps retrying a renewal before
	// it steps down. Default 10s.
	RenewDeadline time.Duration `koanf:"renew_deadline"`
	// RetryPeriod is the wait between attempts to acquire or renew.
	// Default 2s.
	RetryPeriod time.Duration `koanf:"retry_period"`
}

func defaultLeader() Leader {
	return Leader{
		LeaseName:     "edge-leader",
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
	}
}

// Validate checks the Lease name and lease_duration > renew_deadline >
// retry_period > 0, the order client-go's leader election requires.
func (l Leader) Validate() error {
	var errs []error
	if !dnsSubdomain(l.LeaseName) {
		errs = append(errs, invalid("leader.lease_name", l.LeaseName, "must be a Kubernetes object name"))
	}
	errs = append(errs,
		positive("leader.lease_duration", l.LeaseDuration),
		positive("leader.renew_deadline", l.RenewDeadline),
		positive("leader.retry_period", l.RetryPeriod),
	)
	if l.RenewDeadline > 0 && l.LeaseDuration <= l.RenewDeadline {
		errs = append(errs, invalid("leader.lease_duration", l.LeaseDuration,
			"must be > leader.renew_deadline ("+l.RenewDeadline.String()+")"))
	}
	if l.RetryPeriod > 0 && l.RenewDeadline > 0 && l.RenewDeadline <= l.RetryPeriod {
		errs = append(errs, invalid("leader.renew_deadline", l.RenewDeadline,
			"must be > leader.retry_period ("+l.RetryPeriod.String()+")"))
	}
	return errors.Join(errs...)
}

// dnsSubdomain reports an RFC 1123 subdomain, the form of most Kubernetes
// object names.
func dnsSubdomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if !dnsLabel(label) {
			return false
		}
	}
	return true
}
