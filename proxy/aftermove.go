package proxy

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/edge-voice/edge/proxy/internal/relay"
	"github.com/edge-voice/edge/proxy/internal/wsproto"
)

// AfterMove is what a provider's plugin declared of a call that moved to
// another pod (plugins.Description.ResumeNotice and LegEvents), as the
// proxy takes it: the provider holds state of the dead pod (its queued
// audio, the names of marks it sent), and is told to drop it, and its
// answers to the dead pod never reach the new one.
type AfterMove struct {
	// Notices are JSON templates sent to the provider right after a
	// move, each "{{event.path}}" string filled from the stream's
	// opening message of that event.
	Notices []string
	// Legs are the pod's messages the provider answers by name.
	Legs []LegEvent
}

// LegEvent is a pod's message of event Sent that names something at Name
// (dot-separated keys), answered by the provider's message of event Echo
// with the same name at the same path.
type LegEvent struct {
	Sent, Echo, Name string
}

// relayLegs are the leg events as the relay reads them.
func relayLegs(legs []LegEvent) []relay.LegEvent {
	var out []relay.LegEvent
	for _, l := range legs {
		echo := l.Echo
		if echo == "" {
			echo = l.Sent
		}
		out = append(out, relay.LegEvent{Sent: l.Sent, Echo: echo, Name: strings.Split(l.Name, ".")})
	}
	return out
}

// noticePlaceholder is a notice's placeholder, a whole JSON string
// (providers checks the templates at the plugin's start).
var noticePlaceholder = regexp.MustCompile(`"\{\{([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_]+)+)\}\}"`)

// noticeFrames are the notices for a call that moved, filled from its
// stream's opening messages and framed as a server's (unmasked). A
// notice whose placeholder the opening lacks is left out, and said so
// (missing): a template cannot be sent half filled.
func noticeFrames(notices []string, opening []wsproto.Message, events []string) (frames []byte, missing []string) {
	for _, n := range notices {
		var failed bool
		filled := noticePlaceholder.ReplaceAllStringFunc(n, func(ph string) string {
			m := noticePlaceholder.FindStringSubmatch(ph)
			v, ok := openingValue(opening, events, m[1], strings.Split(m[2][1:], "."))
			if !ok {
				failed = true
				missing = append(missing, ph)
			}
			return string(v)
		})
		if failed || !json.Valid([]byte(filled)) {
			continue
		}
		frames = append(frames, wsproto.Frame(true, wsproto.OpText, []byte(filled), nil)...)
	}
	return frames, missing
}

// openingValue is the JSON value at path in the opening message of event,
// as the provider sent it.
func openingValue(opening []wsproto.Message, events []string, event string, path []string) (json.RawMessage, bool) {
	for i, e := range events {
		if e != event || i >= len(opening) {
			continue
		}
		v := json.RawMessage(opening[i].Payload)
		for _, k := range path {
			var obj map[string]json.RawMessage
			if json.Unmarshal(v, &obj) != nil {
				return nil, false
			}
			if v = obj[k]; v == nil {
				return nil, false
			}
		}
		return bytes.TrimSpace(v), true
	}
	return nil, false
}
