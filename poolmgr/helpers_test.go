package poolmgr

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/allocator/allocatortest"
	"github.com/edge-voice/edge/internal/testredis"
)

// goldAndBasic keeps only gold and basic of the seeded tiers, for the
// tests that count which tier each of their pods goes to.
func goldAndBasic(c *allocator.Config) { c.Tiers = allocatortest.Tiers("gold", "basic") }

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// alwaysLeader leads at once, for the loops' tests.
type alwaysLeader struct{ on atomic.Bool }

func (e *alwaysLeader) IsLeader() bool { return e.on.Load() }
func (e *alwaysLeader) Run(ctx context.Context, lead LeadFunc) error {
	e.on.Store(true)
	lead(ctx, "")
	e.on.Store(false)
	return nil
}

func newManager(t testing.TB, a *allocator.Allocator, reg *Registry, el Elector) *Manager {
	return &Manager{
		Pools: a, Registry: reg, Elector: el, Log: quietLog(), Metrics: NewMetrics(nil),
		SweepInterval:     func() time.Duration { return 50 * time.Millisecond },
		ReconcileInterval: func() time.Duration { return 50 * time.Millisecond },
		RetryDelay:        20 * time.Millisecond,
	}
}

// run runs c until the test ends and fails the test if it returns an error.
func run(t *testing.T, c interface{ Run(context.Context) error }) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

func startRedis(t *testing.T) (*testredis.Server, *redis.Client) {
	s := testredis.Start(t)
	return s, s.Client()
}

// testutilCount is how many runs of a loop the metrics saw.
func testutilCount(m *Manager, loop string) uint64 {
	var d dto.Metric
	if err := m.Metrics.LoopSeconds.WithLabelValues(loop).(prometheus.Histogram).Write(&d); err != nil {
		return 0
	}
	return d.GetHistogram().GetSampleCount()
}

// value reads a gauge or counter.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	if d.Gauge != nil {
		return d.GetGauge().GetValue()
	}
	return d.GetCounter().GetValue()
}
