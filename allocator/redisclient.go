package allocator

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// NewClient builds the client for a configured Redis: one server (URL), a
// Sentinel master set (go-redis' failover client, which follows the
// sentinels to the new primary after a failover) or a Cluster. All are one
// redis.UniversalClient, so nothing past this point knows the topology. The
// embedded mode (no Redis configured) is cmd/edge's.
func (r RedisConfig) NewClient() (redis.UniversalClient, error) {
	switch r.Mode() {
	case "sentinel":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:       r.Sentinel.Master,
			SentinelAddrs:    r.Sentinel.Addrs,
			SentinelUsername: r.Sentinel.Username,
			SentinelPassword: r.Sentinel.Password,
			Username:         r.Username,
			Password:         r.Password,
			PoolSize:         r.PoolSize,
			DialTimeout:      r.DialTimeout,
			ReadTimeout:      r.ReadTimeout,
			WriteTimeout:     r.WriteTimeout,
			// A context deadline bounds each call too (request_timeout).
			ContextTimeoutEnabled: true,
		}), nil
	case "cluster":
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 r.Cluster.Addrs,
			Username:              r.Username,
			Password:              r.Password,
			PoolSize:              r.PoolSize,
			DialTimeout:           r.DialTimeout,
			ReadTimeout:           r.ReadTimeout,
			WriteTimeout:          r.WriteTimeout,
			ContextTimeoutEnabled: true,
		}), nil
	case "url":
		opts, err := redis.ParseURL(r.URL)
		if err != nil {
			return nil, fmt.Errorf("redis.url: %w", err)
		}
		return redis.NewClient(r.tune(opts)), nil
	}
	return nil, fmt.Errorf("redis: no redis.url, redis.sentinel or redis.cluster configured")
}

// tune applies the pool size and timeouts to a single server's
// options (the URL mode and cmd/edge's embedded Redis).
func (r RedisConfig) tune(opts *redis.Options) *redis.Options {
	opts.PoolSize = r.PoolSize
	opts.DialTimeout = r.DialTimeout
	opts.ReadTimeout = r.ReadTimeout
	opts.WriteTimeout = r.WriteTimeout
	// A context deadline bounds each call too (request_timeout).
	opts.ContextTimeoutEnabled = true
	return opts
}

// EmbeddedClient is a client for the embedded Redis at addr, with the
// configured pool size and timeouts.
func (r RedisConfig) EmbeddedClient(addr string) redis.UniversalClient {
	return redis.NewClient(r.tune(&redis.Options{Addr: addr}))
}
