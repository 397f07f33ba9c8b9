package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/edgetest"
	"github.com/edge-voice/edge/internal/testpki"
)

// useBuiltEdge makes check-config start the built-in plugins from a built
// edge: this test binary cannot serve `edge plugin <name>`.
func useBuiltEdge(t *testing.T) {
	bin := edgetest.Binary(t)
	prev := executable
	executable = func() (string, error) { return bin, nil }
	t.Cleanup(func() { executable = prev })
}

// A setting only the plugin understands must not pass check-config (it
// would crash-loop the plugin at serve). The real binary
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

// A read-only root filesystem with nothing writable at /tmp (the shipped
// Deployment before it mounted an emptyDir there): the built-in plugins
// cannot create their sockets. edge, and check-config, refuse at start
// and say what to fix, instead of serving with every provider down and a
// log that names only a file under /tmp. TMPDIR names a regular file, which
// nobody, root included, can create files in.
func TestStartRefusesAnUnwritableTempDir(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--listen-public", "127.0.0.1:0", "--listen-admin", "127.0.0.1:0", "--listen-internal", "127.0.0.1:0"},
		{"check-config"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(edgetest.Binary(t), args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + notADir}
		cmd.Stderr = &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("edge %v with TMPDIR=%s still runs after 30s:\n%s", args, notADir, stderr.String())
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("edge %v with TMPDIR=%s: %v, want a non-zero exit", args, notADir, err)
		}
		if want := "provider plugins need a writable directory for their sockets, and " + notADir; !strings.Contains(stderr.String(), want) {
			t.Errorf("edge %v said:\n%s\nwant %q", args, stderr.String(), want)
		}
	}
}

// check-config accepted admin_token: "a" with the admin listener on every
// interface and no admin TLS. It, and serve, refuse a token under 32
// characters there, naming admin_token, unless admin_tls.* is set or
// admin_auth.accept_short_token accepts the risk (then it warns); on
// loopback a short token is the operator's business.
func TestCheckConfigRefusesAShortExposedAdminToken(t *testing.T) {
	sec := testpki.NewSecret(t, testpki.NewCA(t).Valid(t, "edge.example.com"))
	base := "providers: {builtin: false}\nadmin_token: \"a\"\n"
	cases := map[string]struct {
		yaml string
		ok   bool
		warn bool
	}{
		"every interface, no TLS": {yaml: "listen: {admin: \"0.0.0.0:9090\"}\n"},
		"pod address, no TLS":     {yaml: "listen: {admin: \"10.0.0.7:9090\"}\n"},
		"risk accepted":           {yaml: "listen: {admin: \"0.0.0.0:9090\"}\nadmin_auth: {accept_short_token: true}\n", ok: true, warn: true},
		"admin_tls":               {yaml: "listen: {admin: \"0.0.0.0:9090\"}\nadmin_tls: {cert_file: " + sec.CertFile() + ", key_file: " + sec.KeyFile() + "}\n", ok: true},
		"loopback":                {yaml: "listen: {admin: \"127.0.0.1:9090\"}\n", ok: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "edge.yaml")
			if err := os.WriteFile(path, []byte(base+tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := run(t.Context(), []string{"check-config", "--config", path}, nil, &out, &out)
			if tc.ok != (err == nil) {
				t.Fatalf("check-config: %v, want ok: %v\n%s", err, tc.ok, out.String())
			}
			if err != nil && !strings.Contains(err.Error(), "\nadmin_token: shorter than 32 characters") {
				t.Fatalf("check-config: %v, want an error naming admin_token", err)
			}
			if warned := strings.Contains(out.String(), "warning: admin_token is shorter than 32 characters"); warned != tc.warn {
				t.Fatalf("check-config said:\n%s\nwant a warning about admin_token: %v", out.String(), tc.warn)
			}
		})
	}

	// serve refuses the same before it binds anything.
	path := filepath.Join(t.TempDir(), "edge.yaml")
	os.WriteFile(path, []byte(base+"listen: {admin: \"0.0.0.0:0\", public: \"127.0.0.1:0\", internal: \"\"}\n"), 0o600)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := run(ctx, []string{"--config", path}, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "admin_token: shorter than 32 characters") {
		t.Fatalf("serve: %v, want refused naming admin_token", err)
	}
}
