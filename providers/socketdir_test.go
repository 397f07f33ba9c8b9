package providers_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edge-voice/edge/providers"
)

// A container with a read-only root filesystem and nothing writable at
// /tmp: go-plugin's plugins cannot create their sockets, so New refuses,
// naming the directory and the fix, instead of a host whose plugins die on
// every start. TMPDIR names a regular file, which no user, root included,
// can create files in.
func TestNewRefusesAnUnwritableSocketDir(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", notADir)
	spec := providers.Spec{Name: "twilio", Command: func() *exec.Cmd { return exec.Command("true") }}
	_, err := providers.New(providers.Options{}, []providers.Spec{spec})
	if err == nil || !strings.Contains(err.Error(), notADir) || !strings.Contains(err.Error(), "writable") {
		t.Fatalf("New with TMPDIR=%s: %v, want an error naming the directory", notADir, err)
	}
	// No plugin, no socket: nothing to refuse.
	if _, err := providers.New(providers.Options{}, nil); err != nil {
		t.Fatalf("New without plugins: %v", err)
	}
	// go-plugin's own setting, when given, is where the sockets go: a
	// writable one there is fine whatever TMPDIR is.
	sockets := t.TempDir()
	t.Setenv("PLUGIN_UNIX_SOCKET_DIR", sockets)
	if _, err := providers.New(providers.Options{}, []providers.Spec{spec}); err != nil {
		t.Fatalf("New with PLUGIN_UNIX_SOCKET_DIR=%s and TMPDIR unwritable: %v", sockets, err)
	}
	t.Setenv("PLUGIN_UNIX_SOCKET_DIR", "")
	// A writable TMPDIR is fine, and the probe leaves nothing behind.
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	if _, err := providers.New(providers.Options{}, []providers.Spec{spec}); err != nil {
		t.Fatalf("New with a writable TMPDIR: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the probe left %v in %s", left, dir)
	}
}
