package twilio

import (
	"net/http"
	"net/url"

	"github.com/edge-voice/edge/plugins"
)

// RouteStatus is the status callback route: POST /api/v1/twilio/status.
// The call's statusCallback (set on the number or the outbound call) and
// the <Stream statusCallback> edge renders both post there.
const RouteStatus = "status"

// Call statuses that end a call (the call resource's terminal statuses):
// the caller hung up or the call never connected.
var endingCallStatus = map[string]bool{
	"completed": true, "busy": true, "failed": true, "no-answer": true, "canceled": true,
}

// Stream events that end a call's stream: stopped (the call left the
// <Connect>), or an error (the stream could not open: 31920-31924).
var endingStreamEvent = map[string]bool{"stream-stopped": true, "stream-error": true}

// statusCallback acknowledges a verified status callback (204) and reports
// the call ended when the event says so. A stream callback carries
// StreamEvent, a call callback CallStatus.
func statusCallback(form url.Values) *plugins.WebhookResult {
	ack := &plugins.WebhookResult{Answer: &plugins.Response{Status: http.StatusNoContent}}
	callID := form.Get("CallSid")
	if !ValidCallSid(callID) {
		// Not a call edge could have allocated: nothing to end, and
		// nothing for Twilio to send again.
		return ack
	}
	event := form.Get("StreamEvent")
	if event == "" {
		event = form.Get("CallStatus")
		if !endingCallStatus[event] {
			return ack
		}
	} else if !endingStreamEvent[event] {
		return ack
	}
	ack.Ended = &plugins.CallEnd{CallID: callID, Event: event}
	return ack
}
