package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testredis"
	"github.com/edge-voice/edge/internal/testwait"
)

// End to end: a config file edit with a setting the exotel
// plugin refuses is rejected by the running plugin's dry run; the plugin
// keeps serving with its last good settings and /readyz stays ready. A
// valid edit after it applies.
func TestProviderReloadRefusesABadPluginSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs edge processes")
	}
	srv := testredis.Start(t)
	path := filepath.Join(t.TempDir(), "edge.yaml")
	write := func(allow string) {
		t.Helper()
		cfg := "redis:\n  url: " + srv.URL() + "\nreload:\n  interval: 20ms\n" +
			"pods:\n  static:\n" + // a pod per call
			"    - {name: p0, address: 127.0.0.1:9, tier: standard}\n    - {name: p1, address: 127.0.0.1:9, tier: standard}\n" +
			"providers:\n  plugins:\n    exotel: {settings: {allow_ips: '" + allow + "'}}\n"
		// Write then rename, as a ConfigMap update does.
		if err := os.WriteFile(path+".tmp", []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("127.0.0.1")
	edge := edgetest.Start(t, []string{"--config", path})
	if !edge.WaitReady(60 * time.Second) {
		t.Fatal("edge not ready after 60s")
	}
	voicebot := func(call string) int {
		return provGet(t, edge.PublicURL+"/providers/exotel/voicebot?merchant_id=m&CallSid="+call)
	}
	if got := voicebot("ex-1"); got != 200 {
		t.Fatalf("before the reload: %d", got)
	}

	write("not-an-ip")
	testwait.Until(t, 60*time.Second, "the refusal logged", func() bool {
		return strings.Contains(edge.Log(), "provider plugin refused new settings") && strings.Contains(edge.Log(), "not-an-ip")
	})
	if got := voicebot("ex-2"); got != 200 {
		t.Errorf("after the refused reload: %d, want 200 (last good settings)", got)
	}
	if got := provGet(t, edge.AdminURL+"/readyz"); got != 200 {
		t.Errorf("/readyz after the refused reload: %d", got)
	}
	if m := provBody(t, edge.AdminURL+"/metrics"); !strings.Contains(m, `edge_plugin_settings_rejects_total{plugin="exotel"} 1`) {
		t.Errorf("no settings reject counted")
	}

	// 127.0.0.1 is outside the new list: the valid edit applied.
	write("192.0.2.0/24")
	testwait.Until(t, 60*time.Second, "the valid edit applied", func() bool { return voicebot("ex-3") == 403 })
}

func provBody(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
