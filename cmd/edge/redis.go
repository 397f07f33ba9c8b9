package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/config"
)

// newRedis connects to the configured Redis, or starts the embedded one
// when redis.url is empty. closeRedis closes the client, then the embedded
// server.
func newRedis(cfg *config.Config, log *slog.Logger) (rdb redis.UniversalClient, closeRedis func(), err error) {
	var opts *redis.Options
	stopEmbedded := func() {}
	if cfg.Redis.URL == "" {
		addr, stop, err := startEmbeddedRedis()
		if err != nil {
			return nil, nil, fmt.Errorf("start embedded redis: %w", err)
		}
		stopEmbedded = stop
		opts = &redis.Options{Addr: addr}
		log.Warn("no redis.url configured: running an embedded in-process Redis (development only: state is lost on exit and not shared between replicas)")
	} else if opts, err = redis.ParseURL(cfg.Redis.URL); err != nil {
		return nil, nil, fmt.Errorf("redis.url: %w", err)
	}
	opts.PoolSize = cfg.Redis.PoolSize
	opts.DialTimeout = cfg.Redis.DialTimeout
	opts.ReadTimeout = cfg.Redis.ReadTimeout
	opts.WriteTimeout = cfg.Redis.WriteTimeout
	// A context deadline bounds each call too (request_timeout).
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	return client, func() { client.Close(); stopEmbedded() }, nil
}

// newAllocator makes the allocator and bootstraps voice:tier:config from
// the config file (SETNX): after the first start, Redis holds the truth.
func newAllocator(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*allocator.Allocator, error) {
	alloc, err := allocator.New(rdb, cfg.Allocator, reg)
	if err != nil {
		return nil, err
	}
	reg.MustRegister(allocator.NewPoolCollector(alloc))
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tiers, created, err := alloc.BootstrapTierConfig(bctx, cfg.Allocator.Tiers)
	if err != nil {
		return nil, fmt.Errorf("redis at %s: %w", redactURL(cfg.Redis.URL), err)
	}
	log.Info("tier config", "source", map[bool]string{true: "bootstrapped from config", false: "read from redis"}[created], "chain", tiers.DefaultChain)
	alloc.ApplyTiers(tiers)
	if err := alloc.Preload(bctx); err != nil {
		return nil, err
	}
	return alloc, nil
}
