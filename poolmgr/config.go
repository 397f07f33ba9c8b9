package poolmgr

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/internal/confcheck"
)

// Config is the pool manager's part of edge's configuration: the top-level
// keys pods.*, pool.* and leader.*.
type Config struct {
	// Pods says where voice-agent pods come from.
	Pods PodsConfig `koanf:"pods"`
	// Pool holds the periods of the pool loops.
	Pool PoolConfig `koanf:"pool"`
	// Leader configures leader election (restart: the elector is built
	// once).
	Leader LeaderConfig `koanf:"leader" reload:"restart"`
}

// Pod sources.
const (
	SourceStatic     = "static"
	SourceKubernetes = "kubernetes"
)

// PodsConfig says where voice-agent pods come from.
type PodsConfig struct {
	// Source is "static" (the Static list: dev, tests, VMs) or "kubernetes"
	// (an informer on Namespace and LabelSelector). Default "static".
	Source string `koanf:"source" reload:"restart"`
	// Namespace of the voice-agent pods. Default "default".
	Namespace string `koanf:"namespace" reload:"restart"`
	// LabelSelector picks the voice-agent pods. Default "app=voice-agent".
	LabelSelector string `koanf:"label_selector" reload:"restart"`
	// PodPort is the port media sockets are proxied to on a pod's IP.
	// Default 8000.
	PodPort int `koanf:"pod_port" reload:"restart"`
	// Kubeconfig is a kubeconfig file for running outside the cluster.
	// Empty (the default): in-cluster config.
	Kubeconfig string `koanf:"kubeconfig" reload:"restart"`
	// Static lists the pods when Source is "static". Runtime: a reload
	// adds and removes pods.
	Static []StaticPod `koanf:"static"`
}

// StaticPod is one pod of the static list.
type StaticPod struct {
	// Name is the pod name, as in /ws/pod/<name>/ ([A-Za-z0-9_.-]{1,128}).
	Name string `koanf:"name"`
	// Address is "ip:port" or "localhost:port" of the pod's media server. A
	// host name other than localhost is refused: edge dials the address for
	// every call, and a name that resolves elsewhere later would send calls
	// to the wrong place.
	Address string `koanf:"address"`
	// Tier is the pod's tier or "merchant:<id>" for a merchant's pool.
	// Empty: tier assignment picks one.
	Tier string `koanf:"tier"`
}

// PoolConfig holds the periods of the pool loops (Manager, TierRefresher).
type PoolConfig struct {
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

// LeaderConfig configures leader election (LockElector) on a Kubernetes
// Lease (LeaseLock), or with the static pod source on a Redis lock.
type LeaderConfig struct {
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

// DefaultConfig is the pool manager's defaults.
func DefaultConfig() Config {
	return Config{
		Pods: PodsConfig{
			Source:        SourceStatic,
			Namespace:     "default",
			LabelSelector: "app=voice-agent",
			PodPort:       8000,
		},
		Pool: PoolConfig{
			ZombieSweepInterval: 30 * time.Second,
			ReconcileInterval:   60 * time.Second,
			TierConfigRefresh:   30 * time.Second,
		},
		Leader: LeaderConfig{
			LeaseName:     "edge-leader",
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
	}
}

// Validate checks the pod source, the static list (but not its tiers: see
// ValidateStaticTiers), the periods, and the election timings.
func (c Config) Validate() error {
	return errors.Join(
		c.Pods.validate(),
		confcheck.Positive("pool.zombie_sweep_interval", c.Pool.ZombieSweepInterval),
		confcheck.Positive("pool.reconcile_interval", c.Pool.ReconcileInterval),
		confcheck.Positive("pool.tier_config_refresh", c.Pool.TierConfigRefresh),
		c.Leader.validate(),
	)
}

func (p PodsConfig) validate() error {
	var errs []error
	switch p.Source {
	case SourceStatic, SourceKubernetes:
	default:
		errs = append(errs, confcheck.Invalid("pods.source", p.Source, `must be "static" or "kubernetes"`))
	}
	if p.Source == SourceKubernetes {
		if !dnsLabel(p.Namespace) {
			errs = append(errs, confcheck.Invalid("pods.namespace", p.Namespace, "must be a Kubernetes namespace name"))
		}
		if strings.TrimSpace(p.LabelSelector) == "" {
			// An empty selector matches every pod in the namespace.
			errs = append(errs, confcheck.Invalid("pods.label_selector", p.LabelSelector, "must not be empty"))
		}
	}
	if p.PodPort < 1 || p.PodPort > 65535 {
		errs = append(errs, confcheck.Invalid("pods.pod_port", p.PodPort, "must be 1-65535"))
	}
	seen := make(map[string]int, len(p.Static))
	for i, sp := range p.Static {
		errs = append(errs, sp.validate(fmt.Sprintf("pods.static[%d]", i)))
		if j, dup := seen[sp.Name]; dup && sp.Name != "" {
			errs = append(errs, fmt.Errorf("pods.static[%d].name: %q already used by pods.static[%d]", i, sp.Name, j))
		} else {
			seen[sp.Name] = i
		}
	}
	return errors.Join(errs...)
}

func (sp StaticPod) validate(path string) error {
	var errs []error
	if err := allocator.ValidateID("pod", sp.Name); err != nil {
		errs = append(errs, fmt.Errorf("%s.name: %q: %w", path, sp.Name, err))
	}
	if host, _, err := confcheck.HostPort(path+".address", sp.Address, 1); err != nil {
		errs = append(errs, err)
	} else if _, ipErr := netip.ParseAddr(host); ipErr != nil && host != "localhost" {
		errs = append(errs, fmt.Errorf("%s.address: %q: host must be an IP address or localhost", path, sp.Address))
	}
	if id, ok := strings.CutPrefix(sp.Tier, "merchant:"); ok {
		if err := allocator.ValidateID("merchant", id); err != nil {
			errs = append(errs, fmt.Errorf("%s.tier: %q: %w", path, sp.Tier, err))
		}
	}
	return errors.Join(errs...)
}

// ValidateStaticTiers checks that the static pods' tiers exist in tc (the
// bootstrap tiers of edge's configuration, another section).
func (p PodsConfig) ValidateStaticTiers(tc allocator.TierConfig) error {
	var errs []error
	for i, sp := range p.Static {
		if sp.Tier == "" || strings.HasPrefix(sp.Tier, "merchant:") {
			continue
		}
		if _, ok := tc.Tiers[sp.Tier]; !ok {
			names := strings.Join(slices.Sorted(maps.Keys(tc.Tiers)), ", ")
			errs = append(errs, fmt.Errorf("pods.static[%d].tier: %q: no such tier (have %s)", i, sp.Tier, names))
		}
	}
	return errors.Join(errs...)
}

// validate checks the Lease name and lease_duration > renew_deadline >
// retry_period > 0: a leader that cannot renew steps down before followers
// may take over, and retries at least once before it does.
func (l LeaderConfig) validate() error {
	var errs []error
	if !dnsSubdomain(l.LeaseName) {
		errs = append(errs, confcheck.Invalid("leader.lease_name", l.LeaseName, "must be a Kubernetes object name"))
	}
	errs = append(errs,
		confcheck.Positive("leader.lease_duration", l.LeaseDuration),
		confcheck.Positive("leader.renew_deadline", l.RenewDeadline),
		confcheck.Positive("leader.retry_period", l.RetryPeriod),
	)
	if l.RenewDeadline > 0 && l.LeaseDuration <= l.RenewDeadline {
		errs = append(errs, confcheck.Invalid("leader.lease_duration", l.LeaseDuration,
			"must be > leader.renew_deadline ("+l.RenewDeadline.String()+")"))
	}
	if l.RetryPeriod > 0 && l.RenewDeadline > 0 && l.RenewDeadline <= l.RetryPeriod {
		errs = append(errs, confcheck.Invalid("leader.renew_deadline", l.RenewDeadline,
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

// dnsLabel reports an RFC 1123 label, the form of a namespace name.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
