package proxy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkHandshake measures what a provider waits for its media socket
// (the WebSocket handshake through edge: token, Redis claim, pod dial and
// the pod's 101), with none and one of four pods broken:
// "refused" is a closed port, "hang" a pod that accepts and never answers
// (it costs proxy.dial_timeout, 1 s by default). With ejection off every
// call that lands on the broken pod pays a failover, which is its cost;
// with ejection on (the default, 50%) only the first one does.
//
//	go test -run '^$' -bench BenchmarkHandshake -benchtime 400x ./proxy/
func BenchmarkHandshake(b *testing.B) {
	for _, tc := range []struct {
		name, broken string
		eject        int
	}{
		{"0of4broken", "", 0},
		{"1of4refused/no-ejection", "closed", 0},
		{"1of4refused/ejection", "closed", 50},
		{"1of4hang/no-ejection", "hang", 0},
		{"1of4hang/ejection", "hang", 50},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newEnv(b, envOpt{cfg: func(c *Config) {
				c.DialTimeout = time.Second
				c.ConnectAttempts = 2
				c.ConnectBudget = 3 * time.Second
				c.MaxEjectionPercent = tc.eject
				c.EjectBackoff = time.Hour
			}})
			if tc.broken != "" {
				e.addPod("pod-x", "gold", brokenPod(b, tc.broken))
			} else {
				e.addPod("pod-c", "gold", e.agents["pod-a"].Addr())
			}
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				_, url := e.allocate(fmt.Sprintf("CB%d", i), "")
				start := time.Now()
				c, _, err := websocket.Dial(ctx, url, nil)
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				c.Close(websocket.StatusNormalClosure, "")
				e.waitSockets(0)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(value(e.px.metrics.failovers.WithLabelValues("moved")), "failovers")
		})
	}
}
