package allocator

import (
	"strconv"
	"time"

	"github.com/edge-voice/edge/internal/mediacontract"
)

// SocketEnd is what a media socket's end adds to its call's tombstone.
type SocketEnd = mediacontract.SocketEnd

// Released-by values the tombstone keeps (released_by).
const (
	ReleasedByAPI    = "api"    // POST /api/v1/release (the voice agent)
	ReleasedBySocket = "socket" // the media socket's end
	// ReleasedUnanswered: a webhook edge answered "cannot serve" (Redis
	// did not answer in time) whose allocation ran all the same, once
	// Redis caught up; only while no socket holds the call.
	ReleasedUnanswered = "unanswered"
	// ReleasedByProvider: the call's provider said it ended (a status
	// callback, EndByProvider) before its media socket opened; the
	// record's ended_by names the event.
	ReleasedByProvider = "provider"
	// ReleasedRefused: a media socket a replica refused because Redis did
	// not answer its claim (a partition of that replica): the provider
	// hung up, so the call is ended once Redis answers, only while no
	// socket holds it (another replica may have admitted a retry).
	ReleasedRefused = "refused"
)

// recordArgs are release.lua's record fields: who released the call and,
// when a socket's end did, the socket's close and counters. Only what the
// socket already counted: nothing is written per message.
func recordArgs(by string, end *SocketEnd) []any {
	pairs := []any{"released_by", by}
	if end != nil {
		pairs = append(pairs,
			"socket_end", end.Ended,
			"closed_by", end.ClosedBy,
			"close_code", end.CloseCode,
			"socket_closed_at", millis(end.Closed),
			"messages_in", strconv.FormatInt(end.MessagesIn, 10),
			"messages_out", strconv.FormatInt(end.MessagesOut, 10),
			"bytes_in", strconv.FormatInt(end.BytesIn, 10),
			"bytes_out", strconv.FormatInt(end.BytesOut, 10),
		)
		if end.Reason != "" {
			pairs = append(pairs, "close_reason", end.Reason)
		}
	}
	return append([]any{len(pairs) / 2}, pairs...)
}

// millis is t in unix ms as the scripts store it ("" for the zero time).
func millis(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}
