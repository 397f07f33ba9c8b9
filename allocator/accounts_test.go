package allocator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// A call keeps the provider account whose webhook created it: a repeat
// returns it, the timeline shows it, and only that account's end ends the
// call; another account's end changes nothing. A call stored without an
// account is ended by any.
func TestProviderEndOnlyByTheCallsAccount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := allocatortest.New(t, rdb)
		k := a.Keys()
		register(t, a, "gold", "g0", "g1")
		al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-acct", Creator: "provider:twilio", Account: "AC1"})
		if err != nil || al.Account != "AC1" {
			t.Fatalf("Allocate = %+v, %v", al, err)
		}
		if again, err := a.Allocate(ctx, allocator.Request{CallID: "CA-acct", Creator: "provider:twilio", Account: "AC2"}); err != nil || !again.WasExisting || again.Account != "AC1" {
			t.Errorf("another account's repeat = %+v, %v; want the existing call, account AC1", again, err)
		}
		if tl, err := a.Timeline(ctx, "CA-acct"); err != nil || tl.Account != "AC1" {
			t.Errorf("timeline = %+v, %v", tl, err)
		}
		before := dumpKeys(t, rdb, k.Call("CA-acct"), k.PoolAvailable("gold"), k.PodInfo("g0"))
		for _, account := range []string{"AC2", ""} {
			if _, err := a.EndByProvider(ctx, "CA-acct", "provider:twilio", account, "completed"); !errors.Is(err, allocator.ErrOtherAccount) {
				t.Errorf("end by account %q: %v, want ErrOtherAccount", account, err)
			}
		}
		if after := dumpKeys(t, rdb, k.Call("CA-acct"), k.PoolAvailable("gold"), k.PodInfo("g0")); !equalDumps(before, after) {
			t.Error("another account's end changed the call or its pod")
		}
		if _, err := a.EndByProvider(ctx, "CA-acct", "provider:twilio", "bad account!", "completed"); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("an account unfit to store: %v, want ErrInvalidID", err)
		}
		if end, err := a.EndByProvider(ctx, "CA-acct", "provider:twilio", "AC1", "completed"); err != nil || !end.Released.ReleasedToPool {
			t.Errorf("end by the call's account = %+v, %v", end, err)
		}
		if tl, _ := a.Timeline(ctx, "CA-acct"); tl.State != "ended" || tl.Account != "AC1" {
			t.Errorf("ended call's record = %+v, want its account kept", tl)
		}

		// Allocated with no account (one account, or before accounts).
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-none", Creator: "provider:twilio"}); err != nil {
			t.Fatal(err)
		}
		if end, err := a.EndByProvider(ctx, "CA-none", "provider:twilio", "AC2", "completed"); err != nil || end.Released.PodName == "" {
			t.Errorf("end of a call without an account = %+v, %v", end, err)
		}
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-bad", Account: "AC 1"}); !errors.Is(err, allocator.ErrInvalidID) {
			t.Errorf("an account unfit to store: %v, want ErrInvalidID", err)
		}
	})
}

// A call waiting for capacity carries its account: another account's
// callback does not end its wait, nor does another account's webhook join
// it, and the pod it is handed is stored with its account.
func TestWaitingCallKeepsItsAccount(t *testing.T) {
	forEachBackend(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		a := waitingAllocator(t, rdb, 30*time.Second, nil, onePodTiers)
		register(t, a, "standard", "p0")
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-holder", Creator: "provider:twilio"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			al, err := a.Allocate(ctx, allocator.Request{CallID: "CA-waits", Creator: "provider:twilio", Account: "AC1"})
			if err == nil && al.Account != "AC1" {
				err = errors.New("served without its account: " + al.Account)
			}
			done <- err
		}()
		awaitWaiters(t, rdb, a, 1)
		if _, err := a.EndByProvider(ctx, "CA-waits", "provider:twilio", "AC2", "canceled"); !errors.Is(err, allocator.ErrOtherAccount) {
			t.Errorf("another account's end of the waiting call: %v, want ErrOtherAccount", err)
		}
		var nc *allocator.NoCapacityError
		if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-waits", Creator: "provider:twilio", Account: "AC2"}); !errors.As(err, &nc) {
			t.Errorf("another account's webhook of the waiting call: %v, want no capacity", err)
		}
		if n := waiters(t, rdb, a); n != 1 {
			t.Fatalf("%d calls queued, want the one still waiting", n)
		}
		if _, err := a.Release(ctx, "CA-holder"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the waiting call: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting call was not served")
		}
		if tl, err := a.Timeline(ctx, "CA-waits"); err != nil || tl.Account != "AC1" {
			t.Errorf("served call's timeline = %+v, %v; want account AC1", tl, err)
		}
	})
}

// After Redis lost its data, the calls a replica writes back keep their
// accounts, whether their socket relays there or has not come yet: the
// loss does not make a call any account's to end.
func TestWrittenBackCallsKeepTheirAccounts(t *testing.T) {
	rs := testredis.Start(t)
	ctx := context.Background()
	a := allocatortest.New(t, rs.Client(), func(c *allocator.Config) {
		c.Tiers = allocator.TierConfig{
			Tiers:        map[string]allocator.Tier{"gold": {Type: allocator.Exclusive, Target: 2}},
			DefaultChain: []string{"gold"},
		}
		c.RecoveryHold = 400 * time.Millisecond
		c.HeartbeatInterval = 100 * time.Millisecond
	})
	pods := []allocator.PodState{
		{Name: "pod-0", Address: "127.0.0.1:9000", Tier: "gold", Ready: true},
		{Name: "pod-1", Address: "127.0.0.1:9001", Tier: "gold", Ready: true},
	}
	if _, err := a.SyncPods(ctx, "", pods); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Heartbeat(ctx, "edge-a"); err != nil {
		t.Fatal(err)
	}
	relaying, err := a.Allocate(ctx, allocator.Request{CallID: "CA-relaying", Creator: "provider:twilio", Account: "AC1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ClaimMediaOn(ctx, "CA-relaying", relaying.PodName, "holder-1", "edge-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA-answered", Creator: "provider:twilio", Account: "AC1"}); err != nil {
		t.Fatal(err)
	}

	rs.Restart()
	if _, err := a.SyncPods(ctx, "", pods); err != nil {
		t.Fatal(err)
	}
	if beat, err := a.Heartbeat(ctx, "edge-a"); err != nil || beat.Reasserted != 2 {
		t.Fatalf("heartbeat after the loss: %+v, %v; want 2 calls written back", beat, err)
	}
	for _, call := range []string{"CA-relaying", "CA-answered"} {
		if tl, err := a.Timeline(ctx, call); err != nil || tl.Account != "AC1" {
			t.Errorf("%s written back as %+v, %v; want account AC1", call, tl, err)
		}
		if _, err := a.EndByProvider(ctx, call, "provider:twilio", "AC2", "completed"); !errors.Is(err, allocator.ErrOtherAccount) {
			t.Errorf("%s: another account's end after the loss: %v, want ErrOtherAccount", call, err)
		}
	}
}
