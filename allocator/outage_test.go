package allocator_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// Redis hung (paused) or gone (killed): calls fail with ErrUnavailable
// within the client's timeouts, and work again once Redis is back.
func TestRedisOutage(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	opts := srv.Options()
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	a := allocatortest.New(t, rdb)
	register(t, a, "gold", "g0")

	failFast := func(t *testing.T) {
		t.Helper()
		start := time.Now()
		_, err := a.Allocate(ctx, allocator.Request{CallID: "CA-down"})
		if !errors.Is(err, allocator.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("failing took %v, want about the 200ms timeout", took)
		}
	}

	t.Run("paused", func(t *testing.T) {
		srv.Pause()
		failFast(t)
		srv.Resume()
		// The call may have run before the timeout; either way it holds g0
		// now or never ran: a retry answers consistently.
		al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-down"})
		if err != nil || al.PodName != "g0" {
			t.Fatalf("after resume: %+v, %v", al, err)
		}
		if _, err := a.Release(ctx, "CA-down"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("killed and restarted empty", func(t *testing.T) {
		srv.Kill()
		failFast(t)
		srv.Restart()
		// The restarted Redis lost the scripts (EVALSHA falls back to EVAL)
		// and the pods (the pool manager registers them again).
		register(t, a, "gold", "g0")
		if al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-up"}); err != nil || al.PodName != "g0" {
			t.Fatalf("after restart: %+v, %v", al, err)
		}
	})
}

// Drains race allocations: once Drain has returned, no allocation that
// starts afterwards gets that pod.
func TestDrainRacingAllocation(t *testing.T) {
	ctx := context.Background()
	rdb := testredis.Start(t).Client()
	a := allocatortest.New(t, rdb)
	var pods []string
	for i := range 16 {
		pods = append(pods, "g"+itoa(i))
	}
	register(t, a, "gold", pods...)

	var drained sync.Map
	var violations, allocations atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				before := map[string]bool{}
				drained.Range(func(k, _ any) bool { before[k.(string)] = true; return true })
				call := "CA-" + itoa(w) + "-" + itoa(i)
				al, err := a.Allocate(ctx, allocator.Request{CallID: call})
				if err != nil {
					continue
				}
				allocations.Add(1)
				if before[al.PodName] {
					violations.Add(1)
					t.Errorf("%s got %s, drained before the allocation started", call, al.PodName)
				}
				a.Release(ctx, call)
			}
		}()
	}
	for _, p := range pods[:12] {
		if _, err := a.Drain(ctx, p); err != nil {
			t.Fatal(err)
		}
		drained.Store(p, true)
	}
	close(stop)
	wg.Wait()
	for _, p := range pods[:12] {
		if rdb.SIsMember(ctx, a.Keys().PoolAvailable("gold"), p).Val() {
			t.Errorf("drained pod %s is available", p)
		}
	}
	if allocations.Load() == 0 {
		t.Fatal("no allocation ran during the drains")
	}
}
