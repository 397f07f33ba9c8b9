package plivo

import (
	"net/http"
	"net/url"
	"regexp"

	"github.com/edge-voice/edge/plugins"
)

// Status callback routes, below /api/v1/plivo/.
const (
	// RouteHangup is the application's (or the outbound call's) hangup_url:
	// Plivo calls it once the call has ended, however it ended.
	RouteHangup = "hangup"
	// RouteStatus is the <Stream statusCallbackUrl> edge renders: the
	// stream's StartStream, StopStream, DroppedStream, ... events.
	RouteStatus = "status"
)

// Stream events that end a call's stream: stopped (the call hung up, or
// the stream timed out) or dropped (it failed to connect, or broke).
var endingStreamEvent = map[string]bool{"StopStream": true, "DroppedStream": true}

// callStatus is a hangup's CallStatus fit to name the event ("completed",
// "no-answer"); anything else is named "hangup".
var callStatus = regexp.MustCompile(`^[a-z][a-z-]{0,31}$`)

// statusCallback acknowledges a verified callback (204) and reports the
// call ended when it says so: every hangup, and the stream events that end
// it.
func statusCallback(route string, form url.Values, nonce string) *plugins.WebhookResult {
	ack := &plugins.WebhookResult{Answer: &plugins.Response{Status: http.StatusNoContent}, Nonce: nonce}
	callID := form.Get("CallUUID")
	if !ValidCallUUID(callID) {
		return ack
	}
	event := ""
	switch route {
	case RouteHangup:
		event = "hangup"
		if s := form.Get("CallStatus"); callStatus.MatchString(s) {
			event = s
		}
	case RouteStatus:
		if e := form.Get("Event"); endingStreamEvent[e] {
			event = e
		}
	}
	if event != "" {
		ack.Ended = &plugins.CallEnd{CallID: callID, Event: event}
	}
	return ack
}
