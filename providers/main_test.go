package providers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/edge-voice/edge/plugins"
	"github.com/edge-voice/edge/plugins/exotel"
	"github.com/edge-voice/edge/plugins/plivo"
	"github.com/edge-voice/edge/plugins/twilio"
)

// pluginEnv makes this test binary a provider plugin: the host tests start
// real plugin processes by re-executing it, with no build step.
const pluginEnv = "EDGE_PROVIDERS_TEST_PLUGIN"

// resumeReplayEnv is the testprov process's Description.ResumeReplay,
// comma-separated ("" declares none).
const resumeReplayEnv = "EDGE_PROVIDERS_TEST_RESUME_REPLAY"

// afterMoveEnv is the testprov process's Description.ResumeNotice and
// LegEvents, as the JSON of a plugins.Description ("" declares none).
const afterMoveEnv = "EDGE_PROVIDERS_TEST_AFTER_MOVE"

func TestMain(m *testing.M) {
	switch os.Getenv(pluginEnv) {
	case "":
		os.Exit(m.Run())
	case "twilio":
		plugins.Serve(twilio.New())
	case "plivo":
		plugins.Serve(plivo.New())
	case "exotel":
		plugins.Serve(exotel.New())
	case "testprov":
		plugins.Serve(&testProvider{})
	}
	os.Exit(0)
}

// testProvider exercises the host: it logs, and hangs on request.
type testProvider struct{}

func (testProvider) Describe(context.Context) (plugins.Description, error) {
	d := plugins.Description{Name: "testprov", Routes: []plugins.Route{{Method: http.MethodPost, Path: "status"}},
		MediaParams: []plugins.MediaParam{{Name: "rate", Values: []string{"1", "2"}}, {Name: "tag", Pattern: "[a-z]{1,8}"}}}
	if r := os.Getenv(resumeReplayEnv); r != "" {
		d.ResumeReplay = strings.Split(r, ",")
	}
	if a := os.Getenv(afterMoveEnv); a != "" {
		var after plugins.Description
		if err := json.Unmarshal([]byte(a), &after); err != nil {
			return plugins.Description{}, err
		}
		d.ResumeNotice, d.LegEvents = after.ResumeNotice, after.LegEvents
	}
	return d, nil
}

func (testProvider) Configure(_ context.Context, s plugins.Settings) (plugins.Configured, error) {
	plugins.Log.Info("testprov configured", "greeting", s["greeting"])
	return plugins.Configured{Verifies: true}, nil
}

func (testProvider) Webhook(ctx context.Context, req *plugins.Request) (*plugins.WebhookResult, error) {
	body := string(req.Body)
	switch {
	case body == "hang":
		<-ctx.Done() // the host's deadline cancels the RPC
		return nil, ctx.Err()
	case body == "exit":
		os.Exit(3)
	case strings.HasPrefix(body, "end="):
		// A status callback: "end=<call>:<event>" reports the call ended.
		call, event, _ := strings.Cut(strings.TrimPrefix(body, "end="), ":")
		return &plugins.WebhookResult{Answer: &plugins.Response{Status: http.StatusNoContent},
			Ended: &plugins.CallEnd{CallID: call, Event: event}}, nil
	case strings.HasPrefix(body, "forged-end="):
		// A refusal never ends a call, whatever else the result says.
		return &plugins.WebhookResult{Answer: &plugins.Response{Status: http.StatusForbidden},
			Ended: &plugins.CallEnd{CallID: strings.TrimPrefix(body, "forged-end="), Event: "completed"}}, nil
	case strings.HasPrefix(body, "params="):
		// "params=<call>?<query>": an allocation whose media URL carries
		// the query's parameters, declared or not.
		call, query, _ := strings.Cut(strings.TrimPrefix(body, "params="), "?")
		asked := map[string]string{}
		for pair := range strings.SplitSeq(query, "&") {
			n, v, _ := strings.Cut(pair, "=")
			asked[n] = v
		}
		return &plugins.WebhookResult{Allocate: &plugins.AllocationRequest{CallID: call, MediaParams: asked}}, nil
	case strings.HasPrefix(body, "call="):
		// No template: the host must call Answer.
		return &plugins.WebhookResult{Allocate: &plugins.AllocationRequest{CallID: strings.TrimPrefix(body, "call=")}}, nil
	}
	return plugins.Reject(http.StatusTeapot, "teapot", "short and stout"), nil
}

func (testProvider) Answer(_ context.Context, req *plugins.AnswerRequest) (*plugins.Response, error) {
	if req.Failure != nil {
		return plugins.JSONAnswer(req.Failure.Status, map[string]string{"failed": req.Failure.Kind.String(), "reason": req.Failure.Reason})
	}
	return plugins.JSONAnswer(http.StatusOK, map[string]string{"ws": req.Allocation.WSURL, "pod": req.Allocation.PodName})
}
