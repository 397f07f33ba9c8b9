package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/config"
)

// newRedis connects to the configured Redis (one URL, a Sentinel master set
// or a Cluster: allocator.RedisConfig.NewClient), or starts the embedded one
// when none is configured. closeRedis closes the client, then the embedded
// server.
func newRedis(cfg *config.Config, log *slog.Logger) (rdb redis.UniversalClient, closeRedis func(), err error) {
	routeRedisLog(log)
	rc := cfg.Redis
	// Connections named after the replica: the leader tells a dead replica
	// from a slow one by them (allocator.SweepDeadReplicas).
	rc.ClientName = allocator.ClientName(instanceName(cfg))
	if !rc.Embedded() {
		client, err := rc.NewClient()
		if err != nil {
			return nil, nil, err
		}
		log.Info("redis", "mode", rc.Mode(), "at", redisWhere(rc), "slot_tag", allocator.HashTag(rc.KeyPrefix))
		return client, func() { client.Close() }, nil
	}
	addr, stop, err := startEmbeddedRedis()
	if err != nil {
		return nil, nil, fmt.Errorf("start embedded redis: %w", err)
	}
	log.Warn("no redis.url configured: running an embedded in-process Redis (development only: state is lost on exit and not shared between replicas)")
	client := rc.EmbeddedClient(addr)
	return client, func() { client.Close(); stop() }, nil
}

// newAllocator makes the allocator and bootstraps voice:tier:config from
// the config file (SETNX): after the first start, Redis holds the truth.
func newAllocator(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, reg prometheus.Registerer, log *slog.Logger) (*allocator.Allocator, error) {
	alloc, err := allocator.New(rdb, cfg.Allocator, reg)
	if err != nil {
		return nil, err
	}
	alloc.SetReplica(instanceName(cfg))
	reg.MustRegister(allocator.NewPoolCollector(alloc))
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tiers, created, err := alloc.BootstrapTierConfig(bctx, cfg.Allocator.Tiers)
	if err != nil {
		return nil, fmt.Errorf("redis (%s) at %s: %w", cfg.Redis.Mode(), redisWhere(cfg.Redis), err)
	}
	log.Info("tier config", "source", map[bool]string{true: "bootstrapped from config", false: "read from redis"}[created], "chain", tiers.DefaultChain)
	alloc.ApplyTiers(tiers)
	if err := alloc.Preload(bctx); err != nil {
		return nil, err
	}
	return alloc, nil
}

// redisWhere names the configured Redis for an error, without a password.
func redisWhere(rc allocator.RedisConfig) string {
	switch rc.Mode() {
	case "sentinel":
		return rc.Sentinel.Master + "@" + strings.Join(rc.Sentinel.Addrs, ",")
	case "cluster":
		return strings.Join(rc.Cluster.Addrs, ",")
	}
	return redactURL(rc.URL)
}
