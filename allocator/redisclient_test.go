package allocator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/edge-voice/edge/internal/testredis"
	"github.com/redis/go-redis/v9"
)

// The clients edge builds keep 4 KiB buffers per connection; replies and
// commands many times that size must still go through whole: one long
// value, a long script reply, a long pipeline and a long command.
func TestSmallBuffersCarryLargeReplies(t *testing.T) {
	rs := testredis.Start(t, testredis.TCP())
	rdb, err := RedisConfig{URL: rs.URL()}.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if o := rdb.(*redis.Client).Options(); o.ReadBufferSize != connBufferSize || o.WriteBufferSize != connBufferSize {
		t.Fatalf("buffers %d/%d, want %d", o.ReadBufferSize, o.WriteBufferSize, connBufferSize)
	}
	ctx := context.Background()

	big := strings.Repeat("0123456789abcdef", 64<<10/16*4) // 256 KiB
	if err := rdb.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, "big").Result(); err != nil || got != big {
		t.Fatalf("GET of %d bytes: %d bytes, %v", len(big), len(got), err)
	}

	// A script reply of 5,000 elements (a status over many pods).
	vals, err := rdb.Eval(ctx, `local t = {} for i = 1, 5000 do t[i] = 'pod-' .. i end return t`, nil).StringSlice()
	if err != nil || len(vals) != 5000 || vals[4999] != "pod-5000" {
		t.Fatalf("script reply: %d elements, %v", len(vals), err)
	}

	// A pipeline of 2,000 commands, replies read back in order.
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 2000 {
			p.StrLen(ctx, "big")
		}
		return nil
	})
	if err != nil || len(cmds) != 2000 || cmds[1999].(*redis.IntCmd).Val() != int64(len(big)) {
		t.Fatalf("pipeline: %d replies, %v", len(cmds), err)
	}

	// A command with 3,000 arguments (a sync of many pods).
	members := make([]any, 3000)
	for i := range members {
		members[i] = fmt.Sprintf("voice-agent-%05d", i)
	}
	if err := rdb.SAdd(ctx, "set", members...).Err(); err != nil {
		t.Fatal(err)
	}
	if n := rdb.SCard(ctx, "set").Val(); n != int64(len(members)) {
		t.Fatalf("SADD of %d members stored %d", len(members), n)
	}
}
