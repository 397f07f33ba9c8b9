package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edge-voice/edge/api"
)

// dependency is a check whose answer a test sets.
type dependency struct {
	mu  sync.Mutex
	err error
}

func (d *dependency) set(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

func (d *dependency) check(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// readyz answers one probe of the admin (detail) or public handler.
func readyz(t *testing.T, h http.Handler) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("/readyz body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, body
}

func surfaces(rd *api.Readiness) (admin, public http.Handler) {
	s := &api.Surface{Handlers: &api.Handlers{}, Ready: rd, AdminToken: func() string { return "" }}
	return s.Admin(), s.Public()
}

// A shared dependency failing within its grace keeps the replica ready and
// names it degraded; past the grace readiness drops; one passing check ends
// the run, and the next failure has a whole grace again.
func TestReadinessSharedCheckGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		redis := &dependency{}
		rd := &api.Readiness{}
		rd.AddShared("redis", func() time.Duration { return 10 * time.Second }, redis.check)
		admin, public := surfaces(rd)

		if code, body := readyz(t, admin); code != 200 || body["degraded"] != nil {
			t.Fatalf("healthy: %d %v", code, body)
		}
		redis.set(errors.New("connection refused"))
		if code, body := readyz(t, admin); code != 200 || !strings.Contains(detail(body, "degraded", "redis"), "unreachable for 0s, grace 10s: connection refused") {
			t.Fatalf("first failure: %d %v, want 200 naming redis degraded", code, body)
		}
		time.Sleep(9 * time.Second)
		if code, body := readyz(t, admin); code != 200 || !strings.Contains(detail(body, "degraded", "redis"), "unreachable for 9s, grace 10s") {
			t.Fatalf("9s into a 10s grace: %d %v", code, body)
		}
		if code, body := readyz(t, public); code != 200 || !sameNames(body["degraded"], "redis") {
			t.Fatalf("public, within the grace: %d %v, want names only", code, body)
		}
		time.Sleep(time.Second)
		if code, body := readyz(t, admin); code != 503 || !strings.Contains(detail(body, "failed", "redis"), "unreachable for 10s, longer than the grace 10s") {
			t.Fatalf("grace over: %d %v, want 503 naming redis", code, body)
		}
		if code, body := readyz(t, public); code != 503 || !sameNames(body["failed"], "redis") {
			t.Fatalf("public, grace over: %d %v", code, body)
		}

		redis.set(nil)
		if code, body := readyz(t, admin); code != 200 || body["degraded"] != nil {
			t.Fatalf("answering again: %d %v", code, body)
		}
		redis.set(errors.New("i/o timeout"))
		time.Sleep(5 * time.Second) // nobody probes: the run starts at the first failed check
		readyz(t, admin)
		time.Sleep(9 * time.Second)
		if code, body := readyz(t, admin); code != 200 {
			t.Fatalf("9s into a second run: %d %v, want the whole grace again", code, body)
		}
	})
}

// The replica's own checks and shutdown fail readiness at once, whatever a
// shared check's grace.
func TestReadinessOwnFaultsFailAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		redis, plugin := &dependency{}, &dependency{}
		rd := &api.Readiness{}
		rd.AddShared("redis", func() time.Duration { return time.Minute }, redis.check)
		rd.Add("plugin twilio", plugin.check)
		admin, _ := surfaces(rd)
		readyz(t, admin) // redis reached once

		redis.set(errors.New("connection refused"))
		plugin.set(errors.New("plugin down"))
		code, body := readyz(t, admin)
		if code != 503 || detail(body, "failed", "plugin twilio") != "plugin down" || detail(body, "degraded", "redis") == "" {
			t.Fatalf("plugin down, redis within its grace: %d %v", code, body)
		}
		plugin.set(nil)
		rd.Stop()
		if code, body := readyz(t, admin); code != 503 || detail(body, "failed", "shutdown") == "" {
			t.Fatalf("stopping: %d %v", code, body)
		}
	})
}

// Before the dependency first answered, and with a grace of 0, a failure
// fails readiness at once, with the error alone when the grace is 0 (as
// before there was a grace). The grace is read at each check: a reload
// applies to a run already going.
func TestReadinessSharedCheckWithoutGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		redis := &dependency{err: errors.New("connection refused")}
		var grace atomic.Int64
		grace.Store(int64(30 * time.Second))
		rd := &api.Readiness{}
		rd.AddShared("redis", func() time.Duration { return time.Duration(grace.Load()) }, redis.check)
		admin, _ := surfaces(rd)

		if code, body := readyz(t, admin); code != 503 || !strings.HasPrefix(detail(body, "failed", "redis"), "never reached since start") {
			t.Fatalf("never reached: %d %v", code, body)
		}
		redis.set(nil)
		readyz(t, admin)
		redis.set(errors.New("connection refused"))
		if code, _ := readyz(t, admin); code != 200 {
			t.Fatalf("reached once, then failing: %d", code)
		}
		grace.Store(0)
		if code, body := readyz(t, admin); code != 503 || detail(body, "failed", "redis") != "connection refused" {
			t.Fatalf("grace reloaded to 0: %d %v, want 503 with the error alone", code, body)
		}
	})
}

// A hung dependency costs a probe sharedCheckTimeout, not the probe's whole
// deadline: kubelet counts a probe that times out (1s unless set) as failed,
// grace or not.
func TestReadinessSharedCheckIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rd := &api.Readiness{}
		var hang atomic.Bool
		rd.AddShared("redis", func() time.Duration { return time.Minute }, func(ctx context.Context) error {
			if hang.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		admin, _ := surfaces(rd)
		readyz(t, admin)
		hang.Store(true)
		start := time.Now()
		code, body := readyz(t, admin)
		if took := time.Since(start); took >= time.Second {
			t.Errorf("a hung Redis held the probe %v", took)
		}
		if code != 200 || !strings.Contains(detail(body, "degraded", "redis"), "no answer within") {
			t.Fatalf("hung, within the grace: %d %v", code, body)
		}
	})
}

// Probes overlap (kubelet, the balancer, operators): a failed check that
// started before a passing one finished says nothing new and starts no run.
func TestReadinessStaleFailureIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rd := &api.Readiness{}
		var calls atomic.Int32
		release := make(chan struct{})
		rd.AddShared("redis", func() time.Duration { return time.Minute }, func(ctx context.Context) error {
			if calls.Add(1) == 2 { // the slow one
				<-release
				return errors.New("i/o timeout")
			}
			return nil
		})
		admin, _ := surfaces(rd)
		readyz(t, admin)
		var slowBody map[string]any
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, slowBody = readyz(t, admin)
		}()
		synctest.Wait() // the slow check is running
		time.Sleep(100 * time.Millisecond)
		if code, body := readyz(t, admin); code != 200 || body["degraded"] != nil {
			t.Fatalf("newer check passing: %d %v", code, body)
		}
		close(release)
		<-done
		if slowBody["degraded"] != nil {
			t.Errorf("the probe whose check failed late: %v, want its failure ignored", slowBody)
		}
		if code, body := readyz(t, admin); code != 200 || body["degraded"] != nil {
			t.Fatalf("after the older check failed late: %d %v, want no run started", code, body)
		}
	})
}

// edge_ready follows the last verdict; edge_readiness_shared_down_seconds
// how long the shared check has been failing, read at scrape time.
func TestReadinessMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		redis := &dependency{}
		rd := &api.Readiness{}
		rd.AddShared("redis", func() time.Duration { return 10 * time.Second }, redis.check)
		reg := prometheus.NewPedanticRegistry()
		rd.MustRegister(reg)
		admin, _ := surfaces(rd)
		readyz(t, admin)
		expect := func(ready, down float64) {
			t.Helper()
			families, err := reg.Gather() // the pedantic registry checks the descriptions too
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, f := range families {
				for _, m := range f.GetMetric() {
					name := f.GetName()
					for _, l := range m.GetLabel() {
						name += "{" + l.GetName() + "=" + l.GetValue() + "}"
					}
					got[name] = m.GetGauge().GetValue()
				}
			}
			want := map[string]float64{"edge_ready": ready, "edge_readiness_shared_down_seconds{check=redis}": down}
			if len(got) != len(want) || got["edge_ready"] != ready || got["edge_readiness_shared_down_seconds{check=redis}"] != down {
				t.Errorf("metrics %v, want %v", got, want)
			}
		}
		expect(1, 0)
		redis.set(errors.New("connection refused"))
		readyz(t, admin)
		time.Sleep(4 * time.Second)
		expect(1, 4)
		time.Sleep(7 * time.Second)
		readyz(t, admin)
		expect(0, 11)
		redis.set(nil)
		readyz(t, admin)
		expect(1, 0)
	})
}

// detail is the message of check under key ("failed", "degraded") of an
// admin answer.
func detail(body map[string]any, key, check string) string {
	m, _ := body[key].(map[string]any)
	s, _ := m[check].(string)
	return s
}

func sameNames(v any, names ...string) bool {
	got, _ := v.([]any)
	if len(got) != len(names) {
		return false
	}
	for i := range got {
		if got[i] != names[i] {
			return false
		}
	}
	return true
}

// With Run checking the shared dependencies in the background, /readyz
// answers from what the replica knows: a probe while Redis hangs waits for
// nothing (no time passes in the bubble) and asks Redis nothing, and the
// hang still counts toward the grace once its check gives up.
func TestReadinessAnswersFromStateWhileRedisHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var asked atomic.Int32
		var hang atomic.Bool
		rd := &api.Readiness{}
		rd.AddShared("redis", func() time.Duration { return 30 * time.Second }, func(ctx context.Context) error {
			asked.Add(1)
			if hang.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() { defer close(done); rd.Run(ctx) }()
		synctest.Wait()
		admin, _ := surfaces(rd)
		hang.Store(true)
		time.Sleep(1100 * time.Millisecond) // the next check starts, and hangs
		synctest.Wait()
		before, start := asked.Load(), time.Now()
		code, body := readyz(t, admin)
		if waited := time.Since(start); waited != 0 || asked.Load() != before {
			t.Errorf("the probe waited %v and asked Redis %d times; want neither", waited, asked.Load()-before)
		}
		if code != 200 || body["degraded"] != nil {
			t.Errorf("a check in flight: %d %v; want ready, nothing known yet", code, body)
		}
		time.Sleep(time.Second) // the hung check gave up
		synctest.Wait()
		if code, body := readyz(t, admin); code != 200 || detail(body, "degraded", "redis") == "" {
			t.Errorf("Redis hanging within its grace: %d %v; want ready, redis degraded", code, body)
		}
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if code, body := readyz(t, admin); code != 503 || detail(body, "failed", "redis") == "" {
			t.Errorf("Redis hanging past its grace: %d %v; want 503", code, body)
		}
		cancel()
		<-done
	})
}
