package config

import (
	"strings"
	"testing"
)

// The Sentinel and Cluster settings load from the file and from env (a list
// as a YAML/JSON list), choose the client, keep the generic API closed, and
// never show their passwords.
func TestRedisTopologyLoads(t *testing.T) {
	cfg, err := loadT(t, `
redis:
  sentinel: {master: edge, addrs: ["10.0.0.5:26379", "10.0.0.6:26379"], password: s3ntinel-pw}
  password: data-pw
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Mode() != "sentinel" || len(cfg.Redis.Sentinel.Addrs) != 2 || cfg.Redis.Sentinel.Master != "edge" {
		t.Fatalf("redis = %+v", cfg.Redis)
	}
	if cfg.Redis.Embedded() || cfg.OpenMode() != "off" {
		t.Errorf("a Sentinel deployment is not embedded: embedded=%v generic_api.open=%s", cfg.Redis.Embedded(), cfg.OpenMode())
	}
	if out := cfg.String(); strings.Contains(out, "s3ntinel-pw") || strings.Contains(out, "data-pw") {
		t.Errorf("passwords shown:\n%s", out)
	}

	cfg, err = loadT(t, "", []string{`EDGE_REDIS__CLUSTER__ADDRS=["10.0.1.1:7000","10.0.1.2:7000"]`, "EDGE_REDIS__KEY_PREFIX={voice}:"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Mode() != "cluster" || len(cfg.Redis.Cluster.Addrs) != 2 {
		t.Fatalf("redis from env = %+v", cfg.Redis)
	}

	if _, err := loadT(t, "redis: {cluster: {addrs: [\"n:7000\"]}}\n", nil); err == nil || !strings.Contains(err.Error(), "redis.key_prefix") {
		t.Errorf("Cluster without a hash tag: %v", err)
	}
}
