package telnyx

import (
	"net/http"
	"net/url"

	"github.com/edge-voice/edge/plugins"
)

// RouteStatus is the status callback route, served at
// POST /api/v1/telnyx/status (and /providers/telnyx/status): the
// <Stream statusCallback> edge's answers name, and the TeXML
// application's call progress events URL.
const RouteStatus = "status"

// endingCallStatuses are TeXML's CallStatus values of a call that is over
// (Telnyx's TeXML call progress callbacks, as TwiML's).
var endingCallStatuses = map[string]bool{"completed": true, "busy": true, "no-answer": true, "failed": true, "canceled": true}

// endingStreamEvents are the StreamEvent values of a <Stream> status
// callback after which no media flows: the stream stopped, or failed to
// open or broke (its StreamError says why).
var endingStreamEvents = map[string]bool{"stream-stopped": true, "stream-error": true}

// statusCallback acknowledges a verified status callback (204) and reports
// the call ended when its event ends it. A stream event is read before the
// call's status: a <Stream> callback has no CallStatus.
func statusCallback(form url.Values, nonce string) *plugins.WebhookResult {
	callSid := form.Get("CallSid")
	callID, ok := CallID(callSid)
	if !ok {
		return withNonce(plugins.RejectBadRequest("CallSid is missing or not a Telnyx call control id (v3:...)"), nonce)
	}
	res := &plugins.WebhookResult{Answer: &plugins.Response{Status: http.StatusNoContent}, Nonce: nonce}
	if ev := form.Get("StreamEvent"); endingStreamEvents[ev] {
		res.Ended = &plugins.CallEnd{CallID: callID, Event: ev}
	} else if st := form.Get("CallStatus"); ev == "" && endingCallStatuses[st] {
		res.Ended = &plugins.CallEnd{CallID: callID, Event: st}
	}
	return res
}
