package allocator

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/internal/confcheck"
)

// Config is the allocator's section of edge's configuration (keys
// allocator.*) and what New and Apply take. Every field but KeyPrefix may
// change at run time through Apply. Zero durations mean DefaultConfig's.
type Config struct {
	// KeyPrefix prefixes every key ("": DefaultPrefix). Not a key of this
	// section: edge sets it from redis.key_prefix.
	KeyPrefix string `koanf:"-"`
	// LeaseTTL is how long an allocation lives without a renewal: the window
	// for its media socket to arrive, and how long a call outlives a socket
	// that vanished without a release. The proxy renews it while the socket
	// is open. Default 60s.
	LeaseTTL time.Duration `koanf:"lease_ttl"`
	// CallInfoTTL bounds how long call info outlives its last renewal, for
	// idempotent retries of allocate and for release. Default 1h.
	CallInfoTTL time.Duration `koanf:"call_info_ttl"`
	// EndedTTL is how long a call stays ended once it ended: a late or
	// replayed webhook within it gets the hangup answer, never a pod, so
	// it must span the providers' retry horizon. The call's record (the
	// tombstone, Keys.CallEnded) lives only CallInfoTTL; a compact mark
	// per call (Keys.EndedMarks) lasts EndedTTL. Default 24h; at most
	// MaxEndedTTL.
	EndedTTL time.Duration `koanf:"ended_ttl"`
	// DrainingTTL is how long a pod's draining flag lives; it outlasts the
	// pod's preStop window. Default 6m.
	DrainingTTL time.Duration `koanf:"draining_ttl"`
	// RenewInterval is how often the holder of a lease (the media proxy)
	// renews it. The allocator does not use it: it is validated here, beside
	// LeaseTTL, which it must stay below half of so that one lost renewal
	// does not end a call. Default 20s.
	RenewInterval time.Duration `koanf:"renew_interval"`
	// RecoveryHold is how long no pod is offered after Redis lost its data
	// (restarted empty, flushed), so that every replica re-asserts the calls
	// whose sockets it relays first (at its next heartbeat): a busy pod
	// must not look free. Webhooks arriving meanwhile wait for it. Default
	// 3s; at least twice HeartbeatInterval.
	RecoveryHold time.Duration `koanf:"recovery_hold"`
	// HeartbeatInterval is how often every replica records that it is
	// alive and looks whether Redis lost its data. Default 1s.
	HeartbeatInterval time.Duration `koanf:"heartbeat_interval"`
	// ReplicaTTL is how long a replica may miss its heartbeats before the
	// leader ends the calls whose sockets it held, once it also holds no
	// connection to Redis (a live replica cut off by a slow Redis keeps
	// its connections, so a pause never ends calls). Default 5s; more
	// than twice HeartbeatInterval.
	ReplicaTTL time.Duration `koanf:"replica_ttl"`
	// Migration says edge shares the Redis with a running predecessor, or
	// media still flows through the predecessor's nginx hop and not through
	// edge, so nothing renews leases (docs/migration.md). Leases then last
	// at least PredecessorLeaseTTL, the predecessor's rule, and the sweep
	// lowers a shared pod's load only by calls it saw expire. Default false.
	Migration bool `koanf:"migration"`
	// Tiers is the tier config allocation walks. In edge's configuration it
	// is read from the top-level keys tiers and default_chain and only
	// bootstraps voice:tier:config; at run time it comes from Redis.
	// Default: DefaultTiers.
	Tiers TierConfig `koanf:"-"`
	// Admission is the admission section (admission.*, docs/admission.md), copied
	// here by edge's config so that it reloads with the TTLs. Not a key of
	// this section.
	Admission AdmissionConfig `koanf:"-"`
}

// MaxEndedTTL bounds allocator.ended_ttl: every mark is kept that long,
// and while marks of the older layout may exist allocate.lua reads one
// per EndedBucket of it (169 reads at most).
const MaxEndedTTL = 7 * 24 * time.Hour

// PredecessorLeaseTTL is the predecessor's fixed lease (allocator.go:35 of
// its code, seeds 000): how long its calls hold a pod with nothing renewing.
const PredecessorLeaseTTL = 15 * time.Minute

// EffectiveLeaseTTL is the lease allocations and renewals write: LeaseTTL,
// or at least PredecessorLeaseTTL in migration mode, when no media socket
// through edge renews it.
func (c Config) EffectiveLeaseTTL() time.Duration {
	if c.Migration && c.LeaseTTL < PredecessorLeaseTTL {
		return PredecessorLeaseTTL
	}
	return c.LeaseTTL
}

// DefaultConfig is the allocator's defaults.
func DefaultConfig() Config {
	return Config{
		KeyPrefix:         DefaultPrefix,
		LeaseTTL:          60 * time.Second,
		CallInfoTTL:       time.Hour,
		EndedTTL:          24 * time.Hour,
		DrainingTTL:       6 * time.Minute,
		RenewInterval:     20 * time.Second,
		RecoveryHold:      3 * time.Second,
		HeartbeatInterval: time.Second,
		ReplicaTTL:        5 * time.Second,
		Tiers:             DefaultTiers(),
	}
}

// DefaultTiers is the tier config used when none is given: two exclusive
// "standard" pods, then one "basic" pod shared by up to 4 calls. It suits
// the embedded development mode.
//
//	{"tiers":{"standard":{"type":"exclusive","target":2},
//	          "basic":{"type":"shared","target":1,"max_concurrent":4}},
//	 "default_chain":["standard","basic"]}
func DefaultTiers() TierConfig {
	return TierConfig{
		Tiers: map[string]Tier{
			"standard": {Type: Exclusive, Target: 2},
			"basic":    {Type: Shared, Target: 1, MaxConcurrent: 4},
		},
		DefaultChain: []string{"standard", "basic"},
	}
}

// withDefaults fills zero durations from DefaultConfig.
func (c Config) withDefaults() Config {
	def := DefaultConfig()
	for _, f := range []struct{ v, d *time.Duration }{
		{&c.LeaseTTL, &def.LeaseTTL}, {&c.CallInfoTTL, &def.CallInfoTTL}, {&c.EndedTTL, &def.EndedTTL},
		{&c.DrainingTTL, &def.DrainingTTL}, {&c.RenewInterval, &def.RenewInterval},
		{&c.RecoveryHold, &def.RecoveryHold}, {&c.HeartbeatInterval, &def.HeartbeatInterval},
		{&c.ReplicaTTL, &def.ReplicaTTL},
	} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return c
}

// Validate checks every TTL is positive, renewals come often enough, and
// the tiers (errors name tiers.<name>.<field> and default_chain[i]).
func (c Config) Validate() error {
	errs := []error{
		confcheck.Positive("allocator.lease_ttl", c.LeaseTTL),
		confcheck.Positive("allocator.call_info_ttl", c.CallInfoTTL),
		confcheck.Positive("allocator.draining_ttl", c.DrainingTTL),
		confcheck.Positive("allocator.renew_interval", c.RenewInterval),
	}
	if c.LeaseTTL > 0 && c.RenewInterval > 0 && c.RenewInterval >= c.LeaseTTL/2 {
		errs = append(errs, confcheck.Invalid("allocator.renew_interval", c.RenewInterval,
			fmt.Sprintf("must be < allocator.lease_ttl/2 = %s", c.LeaseTTL/2)))
	}
	// Zero takes the default (withDefaults); relations are checked on the
	// values in effect.
	eff := c.withDefaults()
	if c.EndedTTL < 0 || c.EndedTTL > MaxEndedTTL {
		errs = append(errs, confcheck.Invalid("allocator.ended_ttl", c.EndedTTL,
			fmt.Sprintf("must be between 0 (the default, 24h) and %s: every mark is kept that long, and marks of an older edge are read one per hour of it", MaxEndedTTL)))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"allocator.recovery_hold", c.RecoveryHold}, {"allocator.heartbeat_interval", c.HeartbeatInterval}, {"allocator.replica_ttl", c.ReplicaTTL}} {
		if f.v < 0 {
			errs = append(errs, confcheck.Invalid(f.name, f.v, "must be positive"))
		}
	}
	if eff.RecoveryHold < 2*eff.HeartbeatInterval {
		errs = append(errs, confcheck.Invalid("allocator.recovery_hold", eff.RecoveryHold,
			fmt.Sprintf("must be >= 2 x allocator.heartbeat_interval = %s: every replica must beat at least once within it", 2*eff.HeartbeatInterval)))
	}
	if eff.ReplicaTTL <= 2*eff.HeartbeatInterval {
		errs = append(errs, confcheck.Invalid("allocator.replica_ttl", eff.ReplicaTTL,
			fmt.Sprintf("must be > 2 x allocator.heartbeat_interval = %s: one late beat must not look like a death", 2*eff.HeartbeatInterval)))
	}
	if lease := c.EffectiveLeaseTTL(); c.CallInfoTTL > 0 && lease > 0 && c.CallInfoTTL < lease {
		// Call info outliving the lease is what makes release after a
		// renewal gap find the call.
		want := fmt.Sprintf("must be >= allocator.lease_ttl (%s)", lease)
		if lease != c.LeaseTTL {
			want = fmt.Sprintf("must be >= the lease of allocator.migration (%s)", lease)
		}
		errs = append(errs, confcheck.Invalid("allocator.call_info_ttl", c.CallInfoTTL, want))
	}
	return errors.Join(append(errs, c.Tiers.Validate())...)
}

// RedisConfig is the connection to the Redis that holds the pool state
// (keys redis.*; restart: the client is built once).
type RedisConfig struct {
	// URL is "redis://[user:password@]host:6379/0", "rediss://..." for TLS,
	// or "unix:///path/to/redis.sock", in go-redis's ParseURL syntax. Empty
	// (the default) runs an embedded in-process Redis: development only,
	// state is lost on exit and not shared between replicas.
	URL string `koanf:"url" secret:"url"`
	// KeyPrefix starts every key edge reads or writes. Default
	// DefaultPrefix, the predecessor's, so that migrating is pointing edge
	// at the same Redis. A hash tag such as "{voice}:" keeps all keys in one
	// Redis Cluster slot.
	KeyPrefix string `koanf:"key_prefix"`
	// PoolSize is the client's connection pool size; 0 (the default) keeps
	// go-redis's default of 10 per CPU.
	PoolSize int `koanf:"pool_size"`
	// DialTimeout bounds connecting. Default 2s.
	DialTimeout time.Duration `koanf:"dial_timeout"`
	// ReadTimeout bounds one reply; an allocation is one script call, so
	// this is its worst case. Default 500ms.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// WriteTimeout bounds sending one command. Default 500ms.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// Username and Password authenticate to the Redis data nodes named by
	// Sentinel or Cluster (a URL carries its own).
	Username string `koanf:"username"`
	Password string `koanf:"password" secret:"true"`
	// ClientName names every connection (CLIENT SETNAME), so that the
	// leader can tell this replica's death from a slow heartbeat
	// (ClientName(replica), set by edge). Not a key of this section.
	ClientName string `koanf:"-"`
	// Sentinel names a master set watched by Redis Sentinel: edge follows
	// failovers with go-redis's failover client. Instead of URL.
	Sentinel SentinelConfig `koanf:"sentinel"`
	// Cluster names seed nodes of a Redis Cluster: edge uses the cluster
	// client. Instead of URL; KeyPrefix must carry a hash tag.
	Cluster ClusterConfig `koanf:"cluster"`
}

// SentinelConfig is the Sentinel deployment (keys redis.sentinel.*).
type SentinelConfig struct {
	// Master is the master set's name (sentinel monitor <name> ...).
	Master string `koanf:"master"`
	// Addrs are host:port of the sentinels (any subset is enough to find
	// the others).
	Addrs []string `koanf:"addrs"`
	// Username and Password authenticate to the sentinels themselves.
	Username string `koanf:"username"`
	Password string `koanf:"password" secret:"true"`
}

// ClusterConfig is the Redis Cluster deployment (keys redis.cluster.*).
type ClusterConfig struct {
	// Addrs are host:port of some nodes; the client learns the rest.
	Addrs []string `koanf:"addrs"`
}

// Mode names how edge reaches Redis: "embedded", "url", "sentinel" or
// "cluster".
func (r RedisConfig) Mode() string {
	switch {
	case r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0:
		return "sentinel"
	case len(r.Cluster.Addrs) > 0:
		return "cluster"
	case r.URL != "":
		return "url"
	}
	return "embedded"
}

// DefaultRedisConfig is the connection's defaults.
func DefaultRedisConfig() RedisConfig {
	return RedisConfig{
		KeyPrefix:    DefaultPrefix,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
	}
}

// Embedded reports whether edge should run its in-process Redis.
func (r RedisConfig) Embedded() bool { return r.Mode() == "embedded" }

// Validate checks the URL parses as go-redis will parse it, without ever
// echoing a password.
func (r RedisConfig) Validate() error {
	var errs []error
	if r.URL != "" {
		errs = append(errs, validateRedisURL(r.URL))
	}
	if r.KeyPrefix == "" {
		errs = append(errs, fmt.Errorf("redis.key_prefix: must not be empty (the predecessor's is %q)", DefaultPrefix))
	}
	errs = append(errs, r.validateTopology())
	if r.PoolSize < 0 {
		errs = append(errs, confcheck.Invalid("redis.pool_size", r.PoolSize, "must be >= 0 (0: go-redis default)"))
	}
	errs = append(errs,
		confcheck.Positive("redis.dial_timeout", r.DialTimeout),
		confcheck.Positive("redis.read_timeout", r.ReadTimeout),
		confcheck.Positive("redis.write_timeout", r.WriteTimeout),
	)
	return errors.Join(errs...)
}

func validateRedisURL(s string) error {
	const path = "redis.url"
	u, err := url.Parse(s)
	if err != nil {
		// url.Error repeats the whole URL, password included.
		shown := s
		if strings.Contains(s, "@") {
			shown = confcheck.Redacted
		}
		return fmt.Errorf("%s: %q: not a URL", path, shown)
	}
	if _, err := redis.ParseURL(s); err != nil {
		return fmt.Errorf("%s: %q: %s", path, u.Redacted(), strings.TrimPrefix(err.Error(), "redis: "))
	}
	return nil
}

// validateTopology allows one way to reach Redis, complete, and a hash-tagged
// prefix on Cluster: the scripts touch keys they derive at run time, which
// Cluster runs only when every key of a script is in one slot.
func (r RedisConfig) validateTopology() error {
	var errs []error
	sentinel, cluster := r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0, len(r.Cluster.Addrs) > 0
	if n := btoi(r.URL != "") + btoi(sentinel) + btoi(cluster); n > 1 {
		errs = append(errs, fmt.Errorf("redis: set only one of redis.url, redis.sentinel.*, redis.cluster.addrs"))
	}
	if sentinel && r.Sentinel.Master == "" {
		errs = append(errs, confcheck.Invalid("redis.sentinel.master", "", "must name the master set when redis.sentinel.addrs is set"))
	}
	if sentinel && len(r.Sentinel.Addrs) == 0 {
		errs = append(errs, fmt.Errorf("redis.sentinel.addrs: must list at least one sentinel when redis.sentinel.master is set"))
	}
	for _, list := range []struct {
		key   string
		addrs []string
	}{{"redis.sentinel.addrs", r.Sentinel.Addrs}, {"redis.cluster.addrs", r.Cluster.Addrs}} {
		for _, a := range list.addrs {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				errs = append(errs, confcheck.Invalid(list.key, a, "each must be host:port"))
			}
		}
	}
	if cluster && HashTag(r.KeyPrefix) == "" {
		errs = append(errs, confcheck.Invalid("redis.key_prefix", r.KeyPrefix, `must carry a hash tag on Redis Cluster, e.g. "{voice}:", so that every key is in one slot`))
	}
	return errors.Join(errs...)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
