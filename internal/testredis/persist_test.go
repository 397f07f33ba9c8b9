package testredis

import (
	"context"
	"testing"
)

func TestAOFRestartKeepsDataAndRestartEmptyDropsIt(t *testing.T) {
	ctx := context.Background()
	s := Start(t, TCP(), AOF())
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if got := c.Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("after a restart with AOF: k = %q, want v", got)
	}
	s.RestartEmpty()
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("k survived RestartEmpty")
	}
	// Still persisting after an empty restart.
	c.Set(ctx, "k2", "v2", 0)
	s.Restart()
	if got := c.Get(ctx, "k2").Val(); got != "v2" {
		t.Fatalf("after RestartEmpty and a restart: k2 = %q, want v2", got)
	}
}
