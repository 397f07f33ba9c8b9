package providers

import (
	"errors"
	"net/http"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/plugins"
)

// endCall ends the call a verified status callback reports ended
// (plugins.WebhookResult.Ended), before the plugin's acknowledgement is
// sent. It returns the webhook's outcome: "ended" (released at once: no
// socket had opened), "ending" (a socket is open and ends the call when the
// provider closes it), "answered" (an unknown call, one already ended, or
// another provider's: nothing changes, and the provider is still answered
// 2xx so that it does not retry). Only edge's own failure (Redis not
// answering) is answered here, with 503 and Retry-After, so that the
// provider retries; failed is true then. So is a callback of another
// account than the one whose webhook created the call (account is the
// callback's): 403, as a forged one, and the call goes on.
func (h *Host) endCall(w http.ResponseWriter, r *http.Request, p *proc, e *plugins.CallEnd, account string) (outcome string, failed bool) {
	annotateCall(r.Context(), e.CallID, "")
	end, err := h.opts.Calls.EndByProvider(r.Context(), e.CallID, p.name, account, e.Event)
	switch {
	case errors.Is(err, allocator.ErrOtherAccount):
		return otherAccount(w, p, e.CallID, account, "status callback"), true
	case err == nil && end.SocketOpen:
		return "ending", false
	case err == nil:
		return "ended", false
	case errors.Is(err, allocator.ErrCallNotFound), errors.Is(err, allocator.ErrInvalidID):
		// Whatever a callback names that edge does not hold: a call of
		// another replica's predecessor, a duplicate, an id unfit for a
		// key. Acknowledged so that the provider stops.
		p.log.Debug("status callback for no live call of this provider", "event", e.Event, "err", err)
		return "answered", false
	}
	f := calls.FailureOf(err)
	p.log.Warn("status callback could not end its call", "call_sid", e.CallID, "event", e.Event, "code", f.Code, "err", err)
	w.Header().Set("Retry-After", "1")
	writeJSON(w, f.Status, f.Code, f.Message)
	return f.Code, true
}
