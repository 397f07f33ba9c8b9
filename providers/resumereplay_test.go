package providers_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/providers"
)

// replaySpec runs testprov declaring the ResumeReplay that declare returns
// for its n-th start (0 first): a restart may declare something else.
func replaySpec(declare func(n int) string) providers.Spec {
	var starts atomic.Int32
	return providers.Spec{Name: "testprov", Command: func() *exec.Cmd {
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = []string{pluginEnv + "=testprov", resumeReplayEnv + "=" + declare(int(starts.Add(1)-1))}
		return cmd
	}}
}

// The host hands out what a real plugin process declared, in its order,
// as a copy; and keeps it while the plugin is down, since the provider's
// streams of calls in progress open the same way whether or not their
// plugin runs.
func TestHostResumeReplay(t *testing.T) {
	e := newEnv(t, replaySpec(func(n int) string {
		if n == 0 {
			return "connected,start"
		}
		return "Start" // refused: every restart fails
	}))
	want := []string{"connected", "start"}
	got := e.host.ResumeReplay("testprov")
	if !slices.Equal(got, want) {
		t.Fatalf("ResumeReplay(testprov) = %q, want %q", got, want)
	}
	got[0] = "changed"
	if again := e.host.ResumeReplay("testprov"); !slices.Equal(again, want) {
		t.Errorf("a caller's change reached the host: %q", again)
	}
	if got := e.host.ResumeReplay("unknown"); got != nil {
		t.Errorf("ResumeReplay(unknown) = %q, want nil", got)
	}

	_, pid := e.waitUp(t, "testprov", 0)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.logs.waitFor(t, "failed to start", "plugin=testprov", "resume replay")
	if got := e.host.ResumeReplay("testprov"); !slices.Equal(got, want) {
		t.Errorf("while the plugin cannot start: %q, want the last declared %q", got, want)
	}
}

// A provider whose plugin never started has declared nothing.
func TestHostResumeReplayBeforeAStart(t *testing.T) {
	bad := spec("twilio", nil)
	bad.SHA256 = strings.Repeat("0", 64)
	e := newEnvNoWait(t, bad)
	e.logs.waitFor(t, "failed to start", "plugin=twilio", "checksum")
	if got := e.host.ResumeReplay("twilio"); got != nil {
		t.Errorf("ResumeReplay(twilio) = %q, want nil", got)
	}
}

// A declaration edge could not check a stream against refuses the
// plugin's start, naming the rule it breaks.
func TestLaunchRefusesBadResumeReplay(t *testing.T) {
	for name, tc := range map[string]struct{ declared, says string }{
		"too many":    {"a,b,c,d,e", "5 declared, at most 4"},
		"upper case":  {"connected,Start", `"Start": want [a-z0-9_-], 1 to 32 bytes`},
		"empty":       {"connected,,start", `"": want [a-z0-9_-], 1 to 32 bytes`},
		"too long":    {strings.Repeat("a", 33), "want [a-z0-9_-], 1 to 32 bytes"},
		"a space":     {"con nected", "want [a-z0-9_-], 1 to 32 bytes"},
		"named twice": {"start,media,start", `"start" declared twice`},
	} {
		t.Run(name, func(t *testing.T) {
			s := replaySpec(func(int) string { return tc.declared })
			_, err := providers.ValidateSpec(context.Background(), s, nil, 30*time.Second)
			if err == nil || !strings.Contains(err.Error(), "resume replay") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("declared %q: %v, want a refusal saying %s", tc.declared, err, tc.says)
			}
		})
	}
	// The most allowed starts: it gets as far as the settings' dry run,
	// which testprov does not have.
	s := replaySpec(func(int) string { return "a,b-1,c_2," + strings.Repeat("d", 32) })
	if _, err := providers.ValidateSpec(context.Background(), s, nil, 30*time.Second); !errors.Is(err, plugins.ErrCannotValidate) {
		t.Errorf("four valid names: %v, want the plugin started (and unable to dry-run)", err)
	}
}
