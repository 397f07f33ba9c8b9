package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/testwait"
)

// A tier of the tier config that the default chain does not name, reached
// only through a merchant's fallback, with a static pod pinned to it: the
// pod registers at start (no "unknown tier"), and once the merchant's
// fallback names the tier through the admin API, the merchant's call is
// allocated there, its media socket reaches the pod and the pod echoes.
func TestTierOutsideTheDefaultChainServesItsMerchant(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	f := newE2E(t)
	std, prem := mediaAgent(t), mediaAgent(t)
	cfg := f.config("edge.yaml", `
tiers:
  tiers:
    standard: {type: exclusive, target: 1}
    premium:  {type: exclusive, target: 1}
  default_chain: [standard]
pods:
  static:
    - {name: std-0, address: "`+std.Addr()+`", tier: standard}
    - {name: prem-0, address: "`+prem.Addr()+`", tier: premium}
`)
	r := f.start("edge", cfg)

	type podRow struct {
		Name  string `json:"pod_name"`
		Tier  string `json:"tier"`
		State string `json:"state"`
	}
	pods := func() map[string]podRow {
		var out struct{ Pods []podRow }
		json.Unmarshal([]byte(provBody(t, r.admin+"/api/v1/pods")), &out)
		m := map[string]podRow{}
		for _, p := range out.Pods {
			m[p.Name] = p
		}
		return m
	}
	testwait.Until(t, 10*time.Second, "prem-0 registered in premium", func() bool {
		p := pods()["prem-0"]
		return p.Tier == "premium" && p.State == "available"
	})
	if strings.Contains(r.Log(), "bad_tier") || strings.Contains(r.Log(), "unknown tier") {
		t.Errorf("edge logged an unknown tier:\n%s", r.Log())
	}

	req, _ := http.NewRequest(http.MethodPut, r.admin+"/api/v1/config/merchants/vip",
		strings.NewReader(`{"fallback":["premium","standard"]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT merchant vip: %d", resp.StatusCode)
	}

	var ans struct {
		PodName    string `json:"pod_name"`
		WSURL      string `json:"ws_url"`
		SourcePool string `json:"source_pool"`
	}
	if st := mediaPost(t, r.public+"/api/v1/allocate", `{"call_sid":"CA-vip-1","merchant_id":"vip"}`, &ans); st != http.StatusOK {
		t.Fatalf("allocate for vip: %d", st)
	}
	if ans.PodName != "prem-0" || ans.SourcePool != "pool:premium" {
		t.Fatalf("vip's call went to %s from %s, want prem-0 from pool:premium", ans.PodName, ans.SourcePool)
	}
	c := mediaDial(t, mediaOn(r, ans.WSURL))
	mediaStream(t, c, "CA-vip-1", 10)
	c.Close(websocket.StatusNormalClosure, "")
	if got := prem.Paths(); len(got) != 1 {
		t.Errorf("prem-0 saw %q, want the one media socket", got)
	}
	testwait.Until(t, 5*time.Second, "prem-0 released", func() bool { return pods()["prem-0"].State == "available" })
	if got := std.Paths(); len(got) != 0 {
		t.Errorf("std-0 saw %s, want nothing", fmt.Sprint(got))
	}
}
