package providers_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/providers"
)

// afterMoveSpec runs testprov opening its stream with connected and start
// and declaring d's ResumeNotice and LegEvents.
func afterMoveSpec(d plugins.Description) providers.Spec {
	b, _ := json.Marshal(d)
	return providers.Spec{Name: "testprov", Command: func() *exec.Cmd {
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = []string{pluginEnv + "=testprov", resumeReplayEnv + "=connected,start", afterMoveEnv + "=" + string(b)}
		return cmd
	}}
}

// A declaration of what a move does that edge could not carry out as
// written refuses the plugin's start, naming the rule it breaks.
func TestLaunchRefusesBadAfterMove(t *testing.T) {
	clear := `{"event":"clear","streamSid":"{{start.streamSid}}"}`
	mark := plugins.LegEvent{Sent: "mark", Name: "mark.name"}
	for name, tc := range map[string]struct {
		d    plugins.Description
		says string
	}{
		"too many notices":      {plugins.Description{ResumeNotice: []string{clear, clear, clear, clear, clear}}, "5 declared, at most 4"},
		"notice too big":        {plugins.Description{ResumeNotice: []string{`{"event":"clear","x":"` + strings.Repeat("a", 1024) + `"}`}}, "at most 1024"},
		"not JSON":              {plugins.Description{ResumeNotice: []string{`{"event":"clear",}`}}, "not a JSON object"},
		"not an object":         {plugins.Description{ResumeNotice: []string{`["clear"]`}}, "not a JSON object"},
		"no event":              {plugins.Description{ResumeNotice: []string{`{"streamSid":"{{start.streamSid}}"}`}}, `no string "event"`},
		"undeclared event":      {plugins.Description{ResumeNotice: []string{`{"event":"clear","sid":"{{media.streamSid}}"}`}}, `names "media"`},
		"placeholder in string": {plugins.Description{ResumeNotice: []string{`{"event":"clear","sid":"MZ{{start.streamSid}}"}`}}, "whole JSON string"},
		"placeholder no path":   {plugins.Description{ResumeNotice: []string{`{"event":"clear","sid":"{{start}}"}`}}, "whole JSON string"},
		"too many leg events":   {plugins.Description{LegEvents: []plugins.LegEvent{mark, {Sent: "a", Name: "n"}, {Sent: "b", Name: "n"}, {Sent: "c", Name: "n"}, {Sent: "d", Name: "n"}}}, "5 declared, at most 4"},
		"leg event a space":     {plugins.Description{LegEvents: []plugins.LegEvent{{Sent: "a mark", Name: "mark.name"}}}, "want [A-Za-z0-9_-]"},
		"leg event no name":     {plugins.Description{LegEvents: []plugins.LegEvent{{Sent: "mark"}}}, "want 1 to 4 dot-separated keys"},
		"leg event deep name":   {plugins.Description{LegEvents: []plugins.LegEvent{{Sent: "mark", Name: "a.b.c.d.e"}}}, "want 1 to 4 dot-separated keys"},
		"answer twice":          {plugins.Description{LegEvents: []plugins.LegEvent{mark, {Sent: "checkpoint", Echo: "mark", Name: "name"}}}, `answer "mark" declared twice`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := providers.ValidateSpec(context.Background(), afterMoveSpec(tc.d), nil, 30*time.Second)
			if err == nil || !strings.Contains(err.Error(), "describe: ") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%+v: %v, want a refusal saying %s", tc.d, err, tc.says)
			}
		})
	}
	// The most allowed starts: it gets as far as the settings' dry run,
	// which testprov does not have.
	most := plugins.Description{
		ResumeNotice: []string{clear, clear, `{"event":"x","a":{"b":"{{connected.v1.v2.v3.v4}}"}}`, `{"event":"y"}`},
		LegEvents:    []plugins.LegEvent{mark, {Sent: "checkpoint", Echo: "playedStream", Name: "name"}, {Sent: "c", Name: "a.b.c.d"}, {Sent: "d", Name: "n"}},
	}
	if _, err := providers.ValidateSpec(context.Background(), afterMoveSpec(most), nil, 30*time.Second); !errors.Is(err, plugins.ErrCannotValidate) {
		t.Errorf("the most allowed: %v, want the plugin started (and unable to dry-run)", err)
	}
}

// The host hands out what a real plugin process declared, answers filled
// in, as a copy.
func TestHostAfterMove(t *testing.T) {
	e := newEnv(t, afterMoveSpec(plugins.Description{
		ResumeNotice: []string{`{"event":"clear","streamSid":"{{start.streamSid}}"}`},
		LegEvents:    []plugins.LegEvent{{Sent: "mark", Name: "mark.name"}},
	}))
	want := providers.AfterMove{
		Notices: []string{`{"event":"clear","streamSid":"{{start.streamSid}}"}`},
		Legs:    []plugins.LegEvent{{Sent: "mark", Echo: "mark", Name: "mark.name"}},
	}
	got := e.host.AfterMove("testprov")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("AfterMove(testprov) (-want +got):\n%s", diff)
	}
	got.Notices[0] = "changed"
	if again := e.host.AfterMove("testprov"); !cmp.Equal(again, want) {
		t.Errorf("a caller's change reached the host: %+v", again)
	}
	if got := e.host.AfterMove("unknown"); !cmp.Equal(got, providers.AfterMove{}) {
		t.Errorf("AfterMove(unknown) = %+v, want none", got)
	}
}
