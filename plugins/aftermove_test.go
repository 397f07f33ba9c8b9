package plugins_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/plugintest"
)

// What a plugin declares of a move (the notices, the leg events) crosses
// gRPC as it is, in its order; a plugin built before the fields declares
// neither.
func TestDescribeAfterMove(t *testing.T) {
	declared := plugins.Description{Name: "moving",
		ResumeNotice: []string{`{"event":"clear","streamSid":"{{start.streamSid}}"}`, `{"event":"hello"}`},
		LegEvents:    []plugins.LegEvent{{Sent: "mark", Name: "mark.name"}, {Sent: "checkpoint", Echo: "playedStream", Name: "name"}},
	}
	for name, tc := range map[string]struct {
		impl plugins.Provider
		want plugins.Description
	}{
		"built before": {&oldProvider{}, plugins.Description{}},
		"declared":     {&movingProvider{d: declared}, declared},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := plugintest.Connect(t, tc.impl).Describe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := plugins.Description{Name: tc.want.Name, ResumeNotice: d.ResumeNotice, LegEvents: d.LegEvents}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}

type movingProvider struct {
	oldProvider
	d plugins.Description
}

func (p *movingProvider) Describe(context.Context) (plugins.Description, error) { return p.d, nil }
