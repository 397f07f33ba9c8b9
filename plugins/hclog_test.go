package plugins

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// go-plugin names the binary's path "plugin" ("plugin process exited",
// "waiting for RPC address"), and edge names the provider "plugin": the
// line carried the key twice and a JSON parser kept the path. The path is
// now "plugin_path"; "plugin" is the provider's name, once.
func TestPluginLinesCarryEachKeyOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil)).With("plugin", "twilio")
	hl := newHCLogger(log)
	hl.Info("plugin process exited", "plugin", "/usr/lib/edge/edge-twilio", "id", 42)
	hl.Debug("waiting for RPC address", "plugin", "/usr/lib/edge/edge-twilio")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines at info, want 1: %q", len(lines), buf.String())
	}
	if n := strings.Count(lines[0], `"plugin":`); n != 1 {
		t.Fatalf("key plugin appears %d times: %s", n, lines[0])
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	if m["plugin"] != "twilio" || m["plugin_path"] != "/usr/lib/edge/edge-twilio" {
		t.Fatalf("plugin=%v plugin_path=%v, want twilio and the binary's path", m["plugin"], m["plugin_path"])
	}
}
