package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-voice/edge/internal/edgetest"
)

// useBuiltEdge makes check-config start the built-in plugins from a built
// edge: this test binary cannot serve `edge plugin <name>`.
func useBuiltEdge(t *testing.T) {
	bin := edgetest.Binary(t)
	prev := executable
	executable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { executable = prev })
}

// Issue 8 item 9: a setting only the plugin understands used to pass
// check-config, and then crash-looped the plugin at serve. The real binary
// starts the exotel plugin, which refuses it; the key is named and the
// exit code is not 0.
func TestCheckConfigAsksThePluginsToValidateSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yaml", "providers:\n  plugins:\n    exotel: {settings: {allow_ips: 'not-an-ip, 10.0.0.1'}}\n")
	var stderr bytes.Buffer
	cmd := exec.Command(edgetest.Binary(t), "check-config", "--config", bad)
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("check-config of a bad plugin setting: %v, want a non-zero exit", err)
	}
	want := `providers.plugins.exotel.settings.allow_ips: "not-an-ip" is not an IP or CIDR`
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("check-config said:\n%s\nwant %s", stderr.String(), want)
	}

	useBuiltEdge(t)
	good := write("good.yaml", "providers:\n  plugins:\n    exotel: {settings: {allow_ips: '10.0.0.0/8'}}\n    twilio: {settings: {failure_mode: nonsense}}\n")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"check-config", "--config", good}, nil, &out, &out); err != nil {
		t.Fatalf("valid plugin settings: %v", err)
	}
	// A plugin's warnings are shown, and do not fail the check.
	if !strings.Contains(out.String(), "providers.plugins.twilio: warning: failure_mode") {
		t.Errorf("no plugin warning in:\n%s", out.String())
	}
	// A plugin that does not start is a configuration error too.
	missing := write("missing.yaml", "providers:\n  plugins:\n    acme: {path: "+filepath.Join(dir, "no-such-plugin")+"}\n")
	err = run(t.Context(), []string{"check-config", "--config", missing}, nil, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "providers.plugins.acme: start") {
		t.Errorf("missing plugin binary: %v", err)
	}
}
