package allocator_test

import (
	"strings"
	"testing"

	"github.com/edge-voice/edge/allocator"
)

// One way to reach Redis, complete; Cluster only with a hash-tagged prefix
// (every key in one slot), and each error names its key.
func TestRedisTopologyValidation(t *testing.T) {
	base := allocator.DefaultRedisConfig
	for name, tc := range map[string]struct {
		mutate func(*allocator.RedisConfig)
		mode   string
		want   string // "" valid
	}{
		"embedded": {func(*allocator.RedisConfig) {}, "embedded", ""},
		"sentinel": {func(r *allocator.RedisConfig) {
			r.Sentinel = allocator.SentinelConfig{Master: "edge", Addrs: []string{"10.0.0.1:26379"}}
		}, "sentinel", ""},
		"sentinel without master": {func(r *allocator.RedisConfig) { r.Sentinel.Addrs = []string{"s:26379"} }, "sentinel", "redis.sentinel.master"},
		"sentinel without addrs":  {func(r *allocator.RedisConfig) { r.Sentinel.Master = "edge" }, "sentinel", "redis.sentinel.addrs"},
		"sentinel addr no port": {func(r *allocator.RedisConfig) {
			r.Sentinel = allocator.SentinelConfig{Master: "edge", Addrs: []string{"s"}}
		}, "sentinel", "redis.sentinel.addrs"},
		"url and sentinel": {func(r *allocator.RedisConfig) {
			r.URL = "redis://x:6379"
			r.Sentinel = allocator.SentinelConfig{Master: "edge", Addrs: []string{"s:26379"}}
		}, "sentinel", "only one of"},
		"cluster tagged": {func(r *allocator.RedisConfig) {
			r.Cluster.Addrs, r.KeyPrefix = []string{"n1:7000"}, "{voice}:"
		}, "cluster", ""},
		"cluster untagged": {func(r *allocator.RedisConfig) { r.Cluster.Addrs = []string{"n1:7000"} }, "cluster", "redis.key_prefix"},
		"cluster empty tag": {func(r *allocator.RedisConfig) {
			r.Cluster.Addrs, r.KeyPrefix = []string{"n1:7000"}, "{}voice:"
		}, "cluster", "redis.key_prefix"},
	} {
		t.Run(name, func(t *testing.T) {
			r := base()
			tc.mutate(&r)
			if r.Mode() != tc.mode {
				t.Errorf("mode = %s, want %s", r.Mode(), tc.mode)
			}
			err := r.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("valid config refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
