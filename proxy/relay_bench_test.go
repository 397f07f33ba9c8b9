package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/proxy/internal/iouring"
)

// BenchmarkRelayEcho is one round trip of a Twilio-sized media frame (a
// ~300-byte text message to the pod and its echo back: two relayed
// messages) through each relay, and the same round trip straight to the
// fake agent. Allocations are counted process-wide, so the client's and
// the agent's are in every figure: what a relay allocates per round trip
// is its allocs/op minus direct's (0 for the epoll relay, whose reads go
// into the loop's buffer and whose writes come from it). CPU per message
// against nginx is bench/media/run.sh's; this one runs without nginx.
//
//	go test -run '^$' -bench RelayEcho -benchmem ./proxy/
//
// +resume is a Twilio call that proxy.resume covers (its opening kept, the
// echoes of its marks read): what a move that may come costs per message.
// cpu-ns/op is the process's CPU per round trip (client, relay and agent
// alike): on a shared machine, steadier than the wall clock.
func BenchmarkRelayEcho(b *testing.B) {
	msg := []byte(`{"event":"media","sequenceNumber":"1","media":{"track":"inbound","chunk":"1","timestamp":"20","payload":"` +
		string(make([]byte, 0)) + `fn9+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+fn5+"},"streamSid":"MZ0"}`)
	var paths []string
	for _, r := range []Relay{relayEpoll, relayUring, relayGoroutines} {
		paths = append(paths, string(r), string(r)+"+resume")
	}
	for _, path := range append([]string{"direct"}, paths...) {
		b.Run(path, func(b *testing.B) {
			relay, resume := Relay(strings.TrimSuffix(path, "+resume")), strings.HasSuffix(path, "+resume")
			if path == "direct" {
				relay = relayEpoll
			}
			if relay == relayUring {
				if err := iouring.Probe(); err != nil {
					b.Skipf("io_uring unavailable: %v", err)
				}
			}
			// As edge runs by default: pods pinged when quiet (an echoing
			// one never is), their pongs looked for in what they send.
			ping := func(c *Config) {
				def := DefaultConfig()
				c.PodPingInterval, c.PodSilence = def.PodPingInterval, def.PodSilence
			}
			opt := envOpt{relay: relay, cfg: ping}
			if resume {
				// A Twilio call that may move: its opening kept, its
				// marks' echoes read (the per-message cost of a move
				// that may come).
				opt.cfg = func(c *Config) { resumeCfg(c); ping(c) }
				opt.opening, opt.afterMove = twilioOpening, twilioAfterMove
			}
			e := newEnv(b, opt)
			var pod, url string
			if resume {
				pod = "pod-a"
				_, url = e.twilioCallOn(pod)
			} else {
				pod, url = e.allocate("CA-bench", "acme")
			}
			if path == "direct" {
				url = "ws://" + e.addrs[pod] + agentPath
			}
			c := e.mustDial(url)
			ctx := context.Background()
			if resume {
				for _, m := range []string{`{"event":"connected"}`, `{"event":"start","start":{"streamSid":"MZ0"},"streamSid":"MZ0"}`} {
					if err := c.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
						b.Fatal(err)
					}
					if _, _, err := c.Read(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			roundTrip := func() {
				if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
					b.Fatal(err)
				}
				if _, got, err := c.Read(ctx); err != nil || len(got) != len(msg) {
					b.Fatalf("echo: %d bytes, %v", len(got), err)
				}
			}
			for range 100 {
				roundTrip() // buffers, pools and the loop warm
			}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				roundTrip()
			}
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
