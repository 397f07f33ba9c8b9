package config

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/poolmgr"
)

// fast makes the Watcher poll every 10ms.
const fast = "reload:\n  interval: 10ms\n"

type change struct{ old, new *Config }

// watched is a running Watcher and what its callbacks reported.
type watched struct {
	w        *Watcher
	initial  *Config
	changes  chan change
	rejects  chan error
	restarts chan []string
}

// startWatcher loads path with env, starts a Watcher on it and stops it when
// the test ends.
func startWatcher(t *testing.T, path string, env []string) *watched {
	t.Helper()
	var args []string
	if path != "" {
		args = []string{"--config", path}
	}
	initial, err := Load(args, env)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWatcher(initial, args, env, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	x := &watched{
		w: w, initial: initial,
		changes: make(chan change, 16), rejects: make(chan error, 16), restarts: make(chan []string, 16),
	}
	w.OnChange = func(old, new *Config) { x.changes <- change{old, new} }
	w.OnReject = func(err error) { x.rejects <- err }
	w.OnRestartRequired = func(keys []string) { x.restarts <- keys }

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
	return x
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// replace writes a file the way editors and kubelet do: a new file renamed
// over the old, so the Watcher never reads half a file.
func replace(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatcherAppliesRuntimeChange(t *testing.T) {
	path := writeFile(t, fast+"log:\n  level: info\n")
	x := startWatcher(t, path, nil)

	replace(t, path, fast+"log:\n  level: info\n# a comment changes the hash, not the config\n")
	replace(t, path, fast+"log:\n  level: debug\nallocator:\n  lease_ttl: 45s\n")
	c := await(t, x.changes, "OnChange")
	if c.old != x.initial {
		t.Error("OnChange old is not the initial config")
	}
	if c.new.Log.Level != "debug" || c.new.Allocator.LeaseTTL != 45*time.Second {
		t.Errorf("new config has log.level=%q lease_ttl=%s, want debug, 45s", c.new.Log.Level, c.new.Allocator.LeaseTTL)
	}
	if x.w.Current() != c.new {
		t.Error("Current() is not the config passed to OnChange")
	}
	if got := x.w.Reloads(); got != 1 {
		t.Errorf("Reloads() = %d, want 1", got)
	}
}

func TestWatcherRejectsInvalidChange(t *testing.T) {
	path := writeFile(t, fast)
	x := startWatcher(t, path, nil)

	replace(t, path, fast+"allocator:\n  lease_ttl: 0s\n")
	err := await(t, x.rejects, "OnReject")
	if !strings.Contains(err.Error(), `allocator.lease_ttl: must be > 0 (got "0s")`) {
		t.Errorf("rejection = %v, want it to name allocator.lease_ttl", err)
	}
	if x.w.Current() != x.initial {
		t.Error("Current() changed after an invalid edit")
	}
	replace(t, path, fast+"allocator:\n  lease_tll: 10s\n")
	if err := await(t, x.rejects, "OnReject"); !strings.Contains(err.Error(), `unknown key "allocator.lease_tll"`) {
		t.Errorf("rejection = %v, want the unknown key", err)
	}
	if got := x.w.Rejects(); got != 2 {
		t.Errorf("Rejects() = %d, want 2", got)
	}

	// The next valid edit is the first OnChange: the invalid ones made none.
	replace(t, path, fast+"allocator:\n  lease_ttl: 50s\n")
	if c := await(t, x.changes, "OnChange"); c.old != x.initial || c.new.Allocator.LeaseTTL != 50*time.Second {
		t.Errorf("OnChange(old initial=%v, lease_ttl=%s), want the initial config and 50s", c.old == x.initial, c.new.Allocator.LeaseTTL)
	}
}

func TestWatcherKeepsRestartFields(t *testing.T) {
	path := writeFile(t, fast+"listen:\n  public: \":8080\"\n")
	x := startWatcher(t, path, nil)

	replace(t, path, fast+"listen:\n  public: \":18080\"\nredis:\n  key_prefix: \"{voice}:\"\n")
	if diff := cmp.Diff([]string{"listen.public", "redis.key_prefix"}, await(t, x.restarts, "OnRestartRequired")); diff != "" {
		t.Errorf("restart keys (-want +got):\n%s", diff)
	}
	if x.w.Current() != x.initial {
		t.Error("a restart-only edit changed Current()")
	}

	// With a runtime change as well, only the runtime change is applied, and
	// this is the first OnChange: the restart-only edit made none.
	replace(t, path, fast+"listen:\n  public: \":18080\"\nredis:\n  key_prefix: \"{voice}:\"\nlog:\n  level: warn\n")
	if diff := cmp.Diff([]string{"listen.public", "redis.key_prefix"}, await(t, x.restarts, "OnRestartRequired")); diff != "" {
		t.Errorf("restart keys (-want +got):\n%s", diff)
	}
	c := await(t, x.changes, "OnChange")
	if c.new.Log.Level != "warn" {
		t.Errorf("log.level = %q, want warn", c.new.Log.Level)
	}
	if c.new.Listen.Public != ":8080" || c.new.Redis.KeyPrefix != "voice:" {
		t.Errorf("restart-only fields applied: listen.public=%q redis.key_prefix=%q", c.new.Listen.Public, c.new.Redis.KeyPrefix)
	}
	if c.new.PublicURL() != "ws://127.0.0.1:8080" {
		t.Errorf("PublicURL() = %q follows the unapplied listener", c.new.PublicURL())
	}
}

// TestWatcherConfigMapSwap mimics how kubelet updates a mounted ConfigMap:
// the file is a symlink through ..data, and ..data is swapped atomically to
// a new directory.
func TestWatcherConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "edge.yaml"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(name, filepath.Join(dir, "..tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..v1", fast)
	path := filepath.Join(dir, "edge.yaml")
	if err := os.Symlink("..data/edge.yaml", path); err != nil {
		t.Fatal(err)
	}
	x := startWatcher(t, path, nil)

	version("..v2", fast+"pods:\n  static:\n    - {name: agent-0, address: \"127.0.0.1:9100\", tier: standard}\n")
	c := await(t, x.changes, "OnChange")
	if diff := cmp.Diff([]poolmgr.StaticPod{{Name: "agent-0", Address: "127.0.0.1:9100", Tier: "standard"}}, c.new.Pods.Static); diff != "" {
		t.Errorf("pods.static (-want +got):\n%s", diff)
	}
}

func TestWatcherMissingFile(t *testing.T) {
	path := writeFile(t, fast)
	x := startWatcher(t, path, nil)

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := await(t, x.rejects, "OnReject"); !strings.Contains(err.Error(), "read config file") {
		t.Errorf("rejection = %v, want a read error", err)
	}
	if x.w.Current() != x.initial {
		t.Error("Current() changed when the file went away")
	}
	replace(t, path, fast+"log:\n  level: error\n")
	if c := await(t, x.changes, "OnChange"); c.new.Log.Level != "error" {
		t.Errorf("log.level = %q, want error", c.new.Log.Level)
	}
	if got := x.w.Rejects(); got != 1 {
		t.Errorf("Rejects() = %d, want 1 (a missing file is reported once)", got)
	}
}

func TestWatcherKeepsEnvironmentAndFlags(t *testing.T) {
	path := writeFile(t, fast)
	env := []string{"EDGE_ALLOCATOR__LEASE_TTL=50s"}
	args := []string{"--config", path, "--log-level", "debug"}
	initial, err := Load(args, env)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWatcher(initial, args, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan *Config, 4)
	w.OnChange = func(_, new *Config) { changes <- new }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	replace(t, path, fast+"allocator:\n  lease_ttl: 45s\n  draining_ttl: 10m\nlog:\n  level: warn\n")
	c := await(t, changes, "OnChange")
	if c.Allocator.LeaseTTL != 50*time.Second || c.Log.Level != "debug" || c.Allocator.DrainingTTL != 10*time.Minute {
		t.Errorf("lease_ttl=%s log.level=%q draining_ttl=%s, want 50s (env), debug (flag), 10m (file)",
			c.Allocator.LeaseTTL, c.Log.Level, c.Allocator.DrainingTTL)
	}
}

func TestWatcherWithoutFile(t *testing.T) {
	initial := Default()
	w, err := NewWatcher(initial, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	cancel()
	if err := await(t, done, "Run to return"); err != nil {
		t.Errorf("Run() = %v, want nil", err)
	}
	if w.Current() != initial {
		t.Error("Current() is not the initial config")
	}
}
