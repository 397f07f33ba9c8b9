package config

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// warnSink hands the Watcher's WARN lines to a test as they are logged.
type warnSink chan string

func (s warnSink) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (s warnSink) WithAttrs([]slog.Attr) slog.Handler           { return s }
func (s warnSink) WithGroup(string) slog.Handler                { return s }
func (s warnSink) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	s <- b.String()
	return nil
}

// awaitWarn waits for a WARN line holding every part.
func awaitWarn(t *testing.T, s warnSink, parts ...string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case line := <-s:
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				return line
			}
		case <-deadline:
			t.Fatalf("no WARN line with %q", parts)
			return ""
		}
	}
}

// writeMode writes a file and sets its mode (umask aside).
func writeMode(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// edge said nothing when its config file, which it re-reads every
// reload.interval and which holds secrets, was writable by every user,
// when a TLS private key was readable by every user, or when
// public_base_url was an explicit ws:// URL (Twilio refuses a Stream URL
// that is not wss://, error 31922). The Watcher warns of each at start,
// and of a file whose mode becomes unsafe while edge runs.
func TestWatcherWarnsOfUnsafeFilesAndPlainMediaURLs(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeMode(t, cert, "cert", 0o644)
	writeMode(t, key, "key", 0o644)
	path := filepath.Join(dir, "edge.yaml")
	writeMode(t, path, fast+"admin_token: 0123456789abcdef0123456789abcdef\n"+
		"public_base_url: ws://edge.example.com\n"+
		"tls: {cert_file: "+cert+", key_file: "+key+"}\n", 0o666)
	args := []string{"--config", path}
	initial, err := Load(args, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := make(warnSink, 64)
	w, err := NewWatcher(initial, args, nil, slog.New(sink))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	awaitWarn(t, sink, "writable by every user", path)
	awaitWarn(t, sink, "readable by every user", key, "tls.key_file")
	awaitWarn(t, sink, "public_base_url", "wss://", "31922")

	// Fixed, nothing more is said; made unsafe again while edge runs, it is
	// said again at the next poll.
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o646); err != nil {
		t.Fatal(err)
	}
	awaitWarn(t, sink, "writable by every user", path)
}

// Warnings names nothing for a safe setup: files readable by their owner
// and group only, a wss:// media base or ws:// on loopback (development).
func TestWarningsQuietWhenSafe(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "tls.key")
	writeMode(t, key, "key", 0o440)
	path := filepath.Join(dir, "edge.yaml")
	writeMode(t, path, "", 0o644)
	for _, base := range []string{"", "wss://edge.example.com", "ws://127.0.0.1:8080", "ws://localhost:8080"} {
		c := Default()
		c.PublicBaseURL = base
		c.TLS.CertFile, c.TLS.KeyFile = key, key
		if got := Warnings(c, path); len(got) != 0 {
			t.Errorf("public_base_url %q: warnings %q, want none", base, got)
		}
	}
}

// A short admin_token that admin_auth.accept_short_token lets through on
// an admin listener other hosts reach in the clear is warned of, without
// its value; on loopback or behind admin_tls it is not.
func TestShortAdminTokenAcceptedIsWarned(t *testing.T) {
	cases := map[string]struct {
		addr string
		tls  bool
		warn bool
	}{
		"every interface": {":9090", false, true},
		"pod address":     {"10.1.2.3:9090", false, true},
		"admin_tls":       {":9090", true, false},
		"loopback":        {"127.0.0.1:9090", false, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Default()
			c.Listen.Admin, c.AdminToken, c.AdminListenerTLS = tc.addr, "tok3n", tc.tls
			c.AdminAuth.AcceptShortToken = true
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := strings.Join(Warnings(c, ""), "\n")
			if tc.warn != strings.Contains(got, "admin_token is shorter than 32 characters (it has 5)") || tc.warn != strings.Contains(got, "admin_auth.accept_short_token") {
				t.Fatalf("warnings %q, want a warning: %v", got, tc.warn)
			}
			if strings.Contains(got, "tok3n") {
				t.Fatalf("a warning shows the token: %q", got)
			}
		})
	}
}
