package allocator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// The scripts build keys with the same prefix as Go, whatever it holds: a
// Redis Cluster hash tag, or characters Lua would need escaped.
func TestPrefixReachesTheScripts(t *testing.T) {
	for _, prefix := range []string{"{voice}:", `odd"\pre` + "\n" + `fix:`} {
		t.Run(prefix, func(t *testing.T) {
			ctx := context.Background()
			rdb := testredis.Start(t).Client()
			a := allocatortest.New(t, rdb, func(c *allocator.Config) { c.KeyPrefix = prefix })
			register(t, a, "gold", "g0")
			mustAllocate(t, a, "CA1", "")
			for _, key := range rdb.Keys(ctx, "*").Val() {
				if !strings.HasPrefix(key, prefix) {
					t.Errorf("key %q lacks the prefix", key)
				}
			}
			if got := rdb.Get(ctx, prefix+"lease:g0").Val(); got != "CA1" {
				t.Fatalf("lease under the prefix = %q", got)
			}
			if _, err := a.Release(ctx, "CA1"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
