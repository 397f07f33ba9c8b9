package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counted is a counter's value.
func counted(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// fakeClock is a hand-moved clock for the throttle.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func authRequest(remote, auth string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/status", nil)
	r.RemoteAddr = remote
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	return r
}

// Failures spend a source's allowance and the clock refills it; a right
// credential gives its try back; a spent source is refused without its
// credential being compared; another source keeps its own.
func TestAuthThrottleSpendsFailuresPerSource(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	th := NewAuthThrottle(func() AdminAuth { return AdminAuth{FailureBurst: 3, FailuresPerSecond: 0.5} })
	th.Now = clk.now
	reg := prometheus.NewRegistry()
	th.MustRegister(reg)
	compared := 0
	try := func(remote string, right bool) (authResult, time.Duration) {
		return th.check(authRequest(remote, "Bearer x"), "admin", func() bool { compared++; return right })
	}

	// A right credential costs nothing, however often.
	for range 10 {
		if res, _ := try("192.0.2.1:1000", true); res != authPassed {
			t.Fatalf("right credential: %v", res)
		}
	}
	for i := range 3 {
		if res, _ := try("192.0.2.1:1000", false); res != authFailed {
			t.Fatalf("failure %d within the burst: %v, want failed", i+1, res)
		}
	}
	before := compared
	res, retry := try("192.0.2.1:2000", true) // another port, the same source
	if res != authThrottled || retry != 2*time.Second {
		t.Fatalf("after the burst: %v retry %v, want throttled, retry 2s", res, retry)
	}
	if compared != before {
		t.Fatal("a throttled source's credential was compared")
	}
	if res, _ := try("192.0.2.2:1000", false); res != authFailed {
		t.Fatalf("another source: %v, want failed (its own allowance)", res)
	}
	// Half the refill time: still refused, with the rest to wait.
	clk.advance(time.Second)
	if res, retry := try("192.0.2.1:1000", false); res != authThrottled || retry != time.Second {
		t.Fatalf("half refilled: %v retry %v, want throttled, retry 1s", res, retry)
	}
	clk.advance(time.Second)
	if res, _ := try("192.0.2.1:1000", true); res != authPassed {
		t.Fatalf("refilled, right credential: %v", res)
	}
	// The right credential gave its token back: one wrong try is left.
	if res, _ := try("192.0.2.1:1000", false); res != authFailed {
		t.Fatalf("refilled, wrong credential: %v, want failed", res)
	}
	if res, _ := try("192.0.2.1:1000", false); res != authThrottled {
		t.Fatalf("spent again: %v, want throttled", res)
	}
	// A request without credentials guesses nothing and spends nothing.
	if res, _ := th.check(authRequest("192.0.2.3:1", ""), "admin", func() bool { t.Fatal("compared"); return false }); res != authFailed {
		t.Fatalf("no credentials: %v", res)
	}
	if got := counted(t, th.failures.WithLabelValues("admin")); got != 5 {
		t.Errorf("edge_admin_auth_failures_total{listener=admin} = %v, want 5", got)
	}
	if got := counted(t, th.throttled.WithLabelValues("admin")); got != 3 {
		t.Errorf("edge_admin_auth_throttled_total{listener=admin} = %v, want 3", got)
	}
	families, err := reg.Gather()
	series := 0
	for _, f := range families {
		series += len(f.GetMetric())
	}
	if err != nil || series != 4 {
		t.Errorf("registered series: %d (%v), want 4: admin and internal of each from the start", series, err)
	}
}

// Sources are whoever connects: the throttle holds at most MaxSources,
// forgetting the one seen longest ago. An IPv6 /64 is one source.
func TestAuthThrottleBoundsItsSources(t *testing.T) {
	th := NewAuthThrottle(func() AdminAuth { return AdminAuth{FailureBurst: 1, FailuresPerSecond: 1e-6} })
	th.MaxSources = 100
	wrong := func() bool { return false }
	for i := range 5000 {
		th.check(authRequest(fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255), "Bearer x"), "admin", wrong)
	}
	if n := len(th.sources); n != 100 || th.recent.Len() != 100 {
		t.Fatalf("tracked %d sources (list %d), want 100", n, th.recent.Len())
	}
	if res, _ := th.check(authRequest("[2001:db8::1]:1", "Bearer x"), "admin", wrong); res != authFailed {
		t.Fatalf("first IPv6 try: %v", res)
	}
	if res, _ := th.check(authRequest("[2001:db8::ffff:2]:1", "Bearer x"), "admin", wrong); res != authThrottled {
		t.Fatalf("another address of the same /64: %v, want throttled", res)
	}
	if res, _ := th.check(authRequest("[2001:db8:0:1::1]:1", "Bearer x"), "admin", wrong); res != authFailed {
		t.Fatalf("another /64: %v, want failed", res)
	}
	if res, _ := th.check(authRequest("[::ffff:10.0.19.135]:1", "Bearer x"), "admin", wrong); res != authThrottled {
		t.Fatalf("an IPv4-mapped address of a spent IPv4 source: %v, want throttled", res)
	}
}

// A reload that lowers the burst caps a fuller allowance at once; an
// invalid allowance reads as the defaults.
func TestAuthThrottleFollowsItsLimits(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	lim := AdminAuth{FailureBurst: 10, FailuresPerSecond: 1}
	th := NewAuthThrottle(func() AdminAuth { return lim })
	th.Now = clk.now
	src := sourceOf("192.0.2.1:1")
	if _, ok := th.take(src); !ok {
		t.Fatal("first take refused")
	}
	lim.FailureBurst = 2
	for i := range 3 {
		if _, ok := th.take(src); ok != (i < 2) {
			t.Fatalf("take %d after the burst fell to 2: ok=%v", i+1, ok)
		}
	}
	lim = AdminAuth{}
	if got := th.limits(); got != DefaultAdminAuth() {
		t.Fatalf("invalid limits read as %+v, want the defaults", got)
	}
}
