package providers_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/edge-voice/edge/plugins"
)

const voicebot = "/providers/exotel/voicebot?CallSid=ex-%s&merchant_id=acme"

func exotelCall(t *testing.T, e *env, id string) answer {
	t.Helper()
	return e.do(t, "GET", strings.Replace(voicebot, "%s", id, 1), "")
}

// A bad setting in a config reload must not restart the working plugin
// with it (the plugin would crash-loop and fail /readyz).
// The running plugin must refuse it in a dry run and keep its last good
// settings, in the same process.
func TestBadSettingOnReloadKeepsTheLastGoodSettings(t *testing.T) {
	e := newEnv(t, spec("exotel", plugins.Settings{"allow_ips": "127.0.0.1"}))
	e.register(t, "basic", "voice-agent-shared")
	gen, _ := e.waitUp(t, "exotel", 0)
	if got := exotelCall(t, e, "1"); got.status != 200 {
		t.Fatalf("before the reload: %+v", got)
	}

	err := e.host.Reconfigure(spec("exotel", plugins.Settings{"allow_ips": "not-an-ip"}))
	if err == nil || !strings.Contains(err.Error(), `"not-an-ip" is not an IP or CIDR`) {
		t.Errorf("Reconfigure = %v, want the plugin's message", err)
	}
	e.logs.waitFor(t, "ERROR", "plugin=exotel", "allow_ips", "not-an-ip")
	if got := exotelCall(t, e, "2"); got.status != 200 {
		t.Errorf("after the rejected reload: %+v", got)
	}
	if err := e.host.Check("exotel")(context.Background()); err != nil {
		t.Errorf("readiness after the rejected reload: %v", err)
	}
	if now, _ := e.waitUp(t, "exotel", 0); now != gen {
		t.Errorf("plugin restarted (start %d, was %d)", now, gen)
	}
	if n := metric(t, e, "edge_plugin_settings_rejects_total", "plugin", "exotel"); n != 1 {
		t.Errorf("settings rejects = %v, want 1", n)
	}

	// A valid change still applies, to the same process: 127.0.0.1 is
	// now outside the list.
	if err := e.host.Reconfigure(spec("exotel", plugins.Settings{"allow_ips": "192.0.2.0/24"})); err != nil {
		t.Fatalf("valid change: %v", err)
	}
	if got := exotelCall(t, e, "3"); got.status != 403 {
		t.Errorf("after the valid change: %+v, want 403", got)
	}
	if now, _ := e.waitUp(t, "exotel", 0); now != gen {
		t.Errorf("plugin restarted for a settings change (start %d, was %d)", now, gen)
	}
}

// A bad setting that reaches a plugin while it restarts (no process to ask
// first) is refused by the new process's Configure: the host configures it
// with the last good settings instead of crash-looping.
func TestBadSettingDuringRestartFallsBackToTheLastGood(t *testing.T) {
	e := newEnv(t, spec("exotel", plugins.Settings{"allow_ips": "127.0.0.1"}))
	e.register(t, "basic", "voice-agent-shared")
	gen, pid := e.waitUp(t, "exotel", 0)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.logs.waitForNew(t, "plugin started", "plugin=exotel")
	e.host.Reconfigure(spec("exotel", plugins.Settings{"allow_ips": "not-an-ip"}))
	e.waitUp(t, "exotel", gen)
	e.logs.waitFor(t, "ERROR", "plugin=exotel", "not-an-ip")
	if got := exotelCall(t, e, "1"); got.status != 200 {
		t.Errorf("after the restart: %+v", got)
	}
	if err := e.host.Check("exotel")(context.Background()); err != nil {
		t.Errorf("readiness: %v", err)
	}
}
