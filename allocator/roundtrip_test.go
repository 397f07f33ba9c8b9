package allocator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// One Redis round trip per allocate and per release, whatever the chain
// length, and per media claim: measured on the client (hook) and on the
// server (commandstats). A replayed allocate of an ended call is refused in
// the same single round trip.
func TestOneRoundTripEach(t *testing.T) {
	ctx := context.Background()
	srv := testredis.Start(t)
	rdb := srv.Client()
	trips := &testredis.RoundTrips{}
	rdb.AddHook(trips)
	a := allocatortest.New(t, rdb)
	// Only the shared tier has room, so allocation walks the whole chain.
	register(t, a, "basic", "shared-0")
	if err := a.Preload(ctx); err != nil {
		t.Fatal(err)
	}

	cases := map[string]func() error{
		"allocate with a merchant and a full walk": func() error {
			_, err := a.Allocate(ctx, allocator.Request{CallID: "CA1", MerchantID: "acme", Creator: "provider:twilio"})
			return err
		},
		"repeat allocate": func() error {
			al, err := a.Allocate(ctx, allocator.Request{CallID: "CA1", Creator: "token:other"})
			if err == nil && al.Creator != "provider:twilio" {
				t.Errorf("repeat allocate creator = %q", al.Creator)
			}
			return err
		},
		"claim media": func() error {
			_, err := a.ClaimMedia(ctx, "CA1", "shared-0", "replica/1")
			return err
		},
		"renew": func() error {
			_, err := a.Renew(ctx, []allocator.Lease{{CallID: "CA1", PodName: "shared-0", Holder: "replica/1"}})
			return err
		},
		"drop media claim": func() error {
			_, err := a.DropMediaClaim(ctx, "CA1", "replica/1")
			return err
		},
		"release": func() error {
			_, err := a.Release(ctx, "CA1")
			return err
		},
		"replayed allocate of the ended call": func() error {
			if _, err := a.Allocate(ctx, allocator.Request{CallID: "CA1"}); !errors.Is(err, allocator.ErrCallEnded) {
				t.Errorf("replay: %v, want ErrCallEnded", err)
			}
			return nil
		},
	}
	for _, name := range []string{"allocate with a merchant and a full walk", "repeat allocate", "claim media", "renew",
		"drop media claim", "release", "replayed allocate of the ended call"} {
		t.Run(name, func(t *testing.T) {
			before := srv.CommandStats(ctx, rdb)
			tripsBefore := trips.Load()
			if err := cases[name](); err != nil {
				t.Fatal(err)
			}
			if got := trips.Load() - tripsBefore; got != 1 {
				t.Errorf("client round trips = %d, want 1", got)
			}
			after := srv.CommandStats(ctx, rdb)
			if got := after["evalsha"] - before["evalsha"]; got != 1 {
				t.Errorf("EVALSHA calls = %d, want 1", got)
			}
			if got := after["eval"] - before["eval"]; got != 0 {
				t.Errorf("EVAL calls = %d, want 0 (the script is sent by hash, not in full)", got)
			}
		})
	}
}
