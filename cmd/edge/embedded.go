package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/alicebob/miniredis/v2"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/api"
	"github.com/edge-voice/edge/config"
	"github.com/edge-voice/edge/internal/fakeagent"
	"github.com/edge-voice/edge/poolmgr"
)

// startEmbeddedRedis runs an in-process Redis (miniredis) on loopback. Keys
// expire on the wall clock, as on a real Redis.
func startEmbeddedRedis() (addr string, stop func(), err error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return "", nil, err
	}
	return m.Addr(), m.Close, nil
}

// newFakeAgents starts built-in fake voice agents (WebSocket echo servers
// on loopback) on the embedded default, when the config lists no pods: two
// in the first exclusive tier of the default chain and one in the first
// shared tier, so that a fresh edge can take calls at once. pods are the
// agents as static pods.
func newFakeAgents(cfg *config.Config, log *slog.Logger) (agents []*fakeagent.Agent, pods []poolmgr.StaticPod, err error) {
	if !cfg.Redis.Embedded() || cfg.Pods.Source != poolmgr.SourceStatic || len(cfg.Pods.Static) > 0 {
		return nil, nil, nil
	}
	var exclusive, shared string
	for _, step := range cfg.Allocator.Tiers.DefaultChain {
		switch t, ok := cfg.Allocator.Tiers.Tiers[step]; {
		case !ok:
		case t.Type == allocator.Exclusive && exclusive == "":
			exclusive = step
		case t.Type == allocator.Shared && shared == "":
			shared = step
		}
	}
	tiers := []string{exclusive, exclusive, shared}
	for i, tier := range tiers {
		if tier == "" {
			tier = exclusive + shared
		}
		ag, err := fakeagent.Listen("127.0.0.1:0", log.With("fake_agent", i))
		if err != nil {
			return nil, nil, fmt.Errorf("start fake agent: %w", err)
		}
		agents = append(agents, ag)
		pods = append(pods, poolmgr.StaticPod{
			Name: fmt.Sprintf("fake-agent-%d", i), Address: ag.Addr(), Tier: tier,
		})
	}
	log.Info("no pods configured: started built-in fake voice agents (WebSocket echo)", "pods", pods)
	return agents, pods, nil
}

// printQuickStart writes commands ready to paste against this edge (on
// its built-in fake agents) to out as plain lines: inside a log line they
// would be quoted and escaped, and a pasted `{\"call_sid\"...` body is
// refused. pub and adm are the bound listeners' URLs; twilio adds an
// unsigned Twilio webhook, which only a Twilio without auth_tokens takes;
// adminToken says the admin listener wants admin_token, which the admin
// lines then read from $EDGE_ADMIN_TOKEN (never printed).
func printQuickStart(out io.Writer, pub, adm, openMode string, twilio, adminToken bool) {
	var b strings.Builder
	b.WriteString("\nTry it (ready to paste):\n")
	auth := ""
	if openMode != api.OpenLoopback && openMode != api.OpenAnyone {
		auth = " -H 'Authorization: Bearer <a generic_api token>'"
	}
	admAuth, admEnv := "", ""
	if adminToken {
		admAuth = ` -H "Authorization: Bearer $EDGE_ADMIN_TOKEN"`
		admEnv = "   (with EDGE_ADMIN_TOKEN exported)"
	}
	fmt.Fprintf(&b, "  allocate a pod:  curl -s -X POST %s/api/v1/allocate%s -H 'Content-Type: application/json' -d '{\"call_sid\":\"CA-demo-1\",\"merchant_id\":\"demo\"}'\n", pub, auth)
	fmt.Fprintf(&b, "  release it:      curl -s -X POST %s/api/v1/release%s -H 'Content-Type: application/json' -d '{\"call_sid\":\"CA-demo-1\"}'\n", adm, admAuth)
	fmt.Fprintf(&b, "  pool status:     curl -s %s/api/v1/status%s\n", adm, admAuth)
	fmt.Fprintf(&b, "  pods and calls:  go run ./cmd/edge admin pods --url %s%s\n", adm, admEnv)
	fmt.Fprintf(&b, "  status page:     %s/\n", adm)
	b.WriteString("  open its media:  go run ./cmd/edge ws '<ws_url from the allocate answer>'   (the fake agent echoes)\n")
	if twilio {
		b.WriteString("  twilio webhook:  curl -s -X POST '" + pub + "/api/v1/twilio/allocate?merchant_id=demo' -d CallSid=CA00000000000000000000000000de0002\n")
	}
	b.WriteString("\n")
	io.WriteString(out, b.String())
}
