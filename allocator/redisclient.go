package allocator

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// connBufferSize sizes each pooled connection's read and write buffers.
// go-redis defaults to 32 KiB each, and 128 KiB each in a second pool kept
// for pipelines: sized for bulk reads, while edge's commands and replies are
// scripts' short arguments and JSON answers of a few hundred bytes. A
// longer reply or command still works, read or written in several pieces
// (TestSmallBuffersCarryLargeReplies). Measured: about 2.6 MB of a
// replica's heap at 1000 media streams were these buffers
// (docs/benchmarks.md, footprint).
const connBufferSize = 4 << 10

// noPipelinePool runs edge's few pipelines (status, timelines, the start-up
// look for the predecessor's calls) on the main pool instead of a dedicated
// one with its own connections and 128 KiB buffers.
const noPipelinePool = -1

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
			ClientName:       r.ClientName,
			PoolSize:         r.PoolSize,
			DialTimeout:      r.DialTimeout,
			ReadTimeout:      r.ReadTimeout,
			WriteTimeout:     r.WriteTimeout,
			ReadBufferSize:   connBufferSize,
			WriteBufferSize:  connBufferSize,
			PipelinePoolSize: noPipelinePool,
			// A context deadline bounds each call too (request_timeout).
			ContextTimeoutEnabled: true,
		}), nil
	case "cluster":
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 r.Cluster.Addrs,
			Username:              r.Username,
			Password:              r.Password,
			ClientName:            r.ClientName,
			PoolSize:              r.PoolSize,
			DialTimeout:           r.DialTimeout,
			ReadTimeout:           r.ReadTimeout,
			WriteTimeout:          r.WriteTimeout,
			ReadBufferSize:        connBufferSize,
			WriteBufferSize:       connBufferSize,
			ContextTimeoutEnabled: true,
		}), nil
	case "url":
		opts, err := redis.ParseURL(r.URL)
		if err != nil {
			return nil, fmt.Errorf("redis.url: %w", err)
		}
		if r.ClientName != "" {
			opts.ClientName = r.ClientName
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
	opts.ReadBufferSize, opts.WriteBufferSize = connBufferSize, connBufferSize
	opts.PipelinePoolSize = noPipelinePool
	// A context deadline bounds each call too (request_timeout).
	opts.ContextTimeoutEnabled = true
	return opts
}

// EmbeddedClient is a client for the embedded Redis at addr, with the
// configured pool size and timeouts.
func (r RedisConfig) EmbeddedClient(addr string) redis.UniversalClient {
	return redis.NewClient(r.tune(&redis.Options{Addr: addr}))
}
