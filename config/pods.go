package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/edge-voice/edge/allocator"
)

// Pod sources.
const (
	SourceStatic     = "static"
	SourceKubernetes = "kubernetes"
)

// Pods says where voice-agent pods come from.
type Pods struct {
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

func defaultPods() Pods {
	return Pods{
		Source:        SourceStatic,
		Namespace:     "default",
		LabelSelector: "app=voice-agent",
		PodPort:       8000,
	}
}

// Validate checks the pod source and the static list; static pods' tiers
// must exist in tc.
func (p Pods) Validate(tc allocator.TierConfig) error {
	var errs []error
	switch p.Source {
	case SourceStatic, SourceKubernetes:
	default:
		errs = append(errs, invalid("pods.source", p.Source, `must be "static" or "kubernetes"`))
	}
	if p.Source == SourceKubernetes {
		if !dnsLabel(p.Namespace) {
			errs = append(errs, invalid("pods.namespace", p.Namespace, "must be a Kubernetes namespace name"))
		}
		if strings.TrimSpace(p.LabelSelector) == "" {
			// An empty selector matches every pod in the namespace.
			errs = append(errs, invalid("pods.label_selector", p.LabelSelector, "must not be empty"))
		}
	}
	if p.PodPort < 1 || p.PodPort > 65535 {
		errs = append(errs, invalid("pods.pod_port", p.PodPort, "must be 1-65535"))
	}
	seen := make(map[string]int, len(p.Static))
	for i, sp := range p.Static {
		errs = append(errs, sp.validate(fmt.Sprintf("pods.static[%d]", i), tc))
		if j, dup := seen[sp.Name]; dup && sp.Name != "" {
			errs = append(errs, fmt.Errorf("pods.static[%d].name: %q already used by pods.static[%d]", i, sp.Name, j))
		} else {
			seen[sp.Name] = i
		}
	}
	return errors.Join(errs...)
}

func (sp StaticPod) validate(path string, tc allocator.TierConfig) error {
	var errs []error
	if err := allocator.ValidateID("pod", sp.Name); err != nil {
		errs = append(errs, fmt.Errorf("%s.name: %q: %w", path, sp.Name, err))
	}
	if host, _, err := hostPort(path+".address", sp.Address, 1); err != nil {
		errs = append(errs, err)
	} else if _, ipErr := netip.ParseAddr(host); ipErr != nil && host != "localhost" {
		errs = append(errs, fmt.Errorf("%s.address: %q: host must be an IP address or localhost", path, sp.Address))
	}
	if sp.Tier != "" {
		if id, ok := strings.CutPrefix(sp.Tier, "merchant:"); ok {
			if err := allocator.ValidateID("merchant", id); err != nil {
				errs = append(errs, fmt.Errorf("%s.tier: %q: %w", path, sp.Tier, err))
			}
		} else if _, ok := tc.Tiers[sp.Tier]; !ok {
			errs = append(errs, fmt.Errorf("%s.tier: %q: no such tier (have %s)", path, sp.Tier, tierNames(tc)))
		}
	}
	return errors.Join(errs...)
}

func tierNames(tc allocator.TierConfig) string {
	return strings.Join(slices.Sorted(maps.Keys(tc.Tiers)), ", ")
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
