package allocator_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// Every key of the schema, every method of allocator.Keys (found by
// reflection, so a key added later is checked too), carries the prefix's
// hash tag: on Redis Cluster all of edge lands in one slot, and a script
// may touch the keys it derives at run time.
func TestEveryKeyCarriesThePrefixHashTag(t *testing.T) {
	k := allocator.NewKeys("{voice}:")
	v := reflect.ValueOf(k)
	strType := reflect.TypeFor[string]()
	checked := 0
	for i := range v.NumMethod() {
		m, name := v.Method(i), v.Type().Method(i).Name
		mt := m.Type()
		if mt.NumOut() != 1 || mt.Out(0) != strType || name == "Prefix" {
			continue
		}
		var args []reflect.Value
		for range mt.NumIn() {
			switch mt.In(len(args)) {
			case strType:
				args = append(args, reflect.ValueOf("some-id"))
			case reflect.TypeFor[time.Time]():
				args = append(args, reflect.ValueOf(time.Now()))
			default:
				t.Fatalf("Keys.%s takes a %s: teach this test to call it", name, mt.In(len(args)))
			}
		}
		key := m.Call(args)[0].String()
		if allocator.HashTag(key) != "voice" {
			t.Errorf("Keys.%s = %q: not in the {voice} slot", name, key)
		}
		checked++
	}
	if checked < 15 {
		t.Fatalf("checked only %d key builders: the reflection missed some", checked)
	}
}

// On a real 3-master Redis Cluster with a hash-tagged prefix, the
// allocator's concurrency test (duplicate allocates and releases racing,
// live invariants checked inside Redis) and the sweep pass unchanged, every
// key lands in one slot, and that slot lives on one master.
func TestCluster(t *testing.T) {
	ctx := context.Background()
	cl := testredis.StartCluster(t, 3)
	cfg := allocator.DefaultRedisConfig()
	cfg.Cluster.Addrs, cfg.KeyPrefix = cl.Addrs(), "{voice}:"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rdb, err := cfg.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	prefix := func(c *allocator.Config) { c.KeyPrefix = "{voice}:" }

	t.Run("concurrency", func(t *testing.T) { concurrentDuplicates(t, rdb, prefix) })
	// Its own prefix (same tag, same slot): the pods above stay out of it.
	t.Run("sweep", func(t *testing.T) {
		clusterSweep(t, rdb, func(c *allocator.Config) { c.KeyPrefix = "{voice}:sweep:" })
	})
	// Waiting for capacity: the scripts' PUBLISH reaches the Waker's
	// subscription through the cluster client.
	t.Run("wait", func(t *testing.T) {
		wait := func(c *allocator.Config) { c.KeyPrefix = "{voice}:wait:" }
		a := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers, wait)
		b := waitingAllocator(t, rdb, 5*time.Second, nil, onePodTiers, wait)
		register(t, a, "standard", "cw0")
		mustAllocate(t, a, "CW-1", "")
		second := goAllocate(ctx, b, "CW-2", "")
		awaitWaiters(t, rdb, a, 1)
		if _, err := a.Release(ctx, "CW-1"); err != nil {
			t.Fatal(err)
		}
		if o := <-second; o.err != nil || o.al.PodName != "cw0" || o.took > 2*time.Second {
			t.Fatalf("waiter on Cluster: %+v %v after %v", o.al, o.err, o.took)
		}
		checkNoWaitKeys(t, rdb, a.Keys())
	})
	t.Run("status", func(t *testing.T) {
		a := allocatortest.New(t, rdb, prefix)
		if _, err := a.Status(ctx); err != nil {
			t.Fatal(err)
		}
	})

	// Where the keys went: one slot, one master, none elsewhere.
	slots := map[int64]int{}
	holders := 0
	for _, n := range cl.Nodes {
		keys := n.Client().Keys(ctx, "*").Val()
		if len(keys) > 0 {
			holders++
		}
		for _, key := range keys {
			slots[n.Client().ClusterKeySlot(ctx, key).Val()]++
		}
	}
	if len(slots) != 1 || holders != 1 {
		t.Fatalf("keys spread over slots %v on %d masters, want one slot on one master", slots, holders)
	}
	t.Logf("every key in one slot: %v", slots)
}

// clusterSweep: dead calls (lease gone) on exclusive and shared pods are
// recovered by the sweep on Cluster, and nothing is left afterwards.
func clusterSweep(t *testing.T, rdb redis.UniversalClient, mutate func(*allocator.Config)) {
	ctx := context.Background()
	a := allocatortest.New(t, rdb, mutate, func(c *allocator.Config) { c.LeaseTTL = time.Second })
	pods := map[string]string{"cg0": "gold", "cs0": "standard", "cb0": "basic"}
	for pod, tier := range pods {
		register(t, a, tier, pod)
	}
	for i := range 3 {
		mustAllocate(t, a, fmt.Sprintf("CS%d", i), "")
	}
	time.Sleep(time.Second) // the lease TTL itself: no event marks its end
	res, err := a.SweepPods(ctx, "", []string{"cg0", "cs0", "cb0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Recovered) != 2 || res.CallsExpired != 1 {
		t.Fatalf("sweep on Cluster = %+v, want 2 exclusive pods recovered and 1 shared call expired", res)
	}
	checkQuiescent(t, rdb, a, pods)
	if got := rdb.HGet(ctx, a.Keys().CallEnded("CS0"), "how").Val(); !strings.Contains(got, "expired") {
		t.Errorf("tombstone of CS0 = %q, want expired", got)
	}
}
