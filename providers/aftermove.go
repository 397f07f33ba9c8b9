package providers

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/edge-voice/edge/plugins"
)

// What a plugin may declare of a call that moved to another pod
// (plugins.Description.ResumeNotice and LegEvents) is bounded: edge sends
// every notice on every move, and the relay looks for every leg event in
// the messages of every socket that may move.
const (
	maxResumeNotices    = 4
	maxResumeNoticeSize = 1 << 10
	maxLegEvents        = 4
)

// AfterMove is what edge does for a provider when one of its calls moves
// to another pod, as its plugin declared it.
type AfterMove struct {
	// Notices are the messages' templates (plugins.Description.ResumeNotice).
	Notices []string
	// Legs are the pod's messages the provider answers by name
	// (plugins.Description.LegEvents), each with its Echo set.
	Legs []plugins.LegEvent
}

// placeholder is a notice's placeholder: a whole JSON string naming an
// opening event and a path of object keys in it.
var (
	placeholder  = regexp.MustCompile(`"\{\{([a-z0-9_-]{1,32})((?:\.[A-Za-z0-9_]{1,32}){1,4})\}\}"`)
	legEventName = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}(\.[A-Za-z0-9_]{1,32}){0,3}$`)
	// legEvent is an event name as providers spell them (Plivo's
	// playedStream): compared with a message's "event" as it is.
	legEvent = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
)

// checkAfterMove checks a plugin's declarations of what a move does:
// notices that are JSON objects with a string "event" once their
// placeholders are filled, placeholders naming only opening (the declared
// ResumeReplay), leg events of plain names. It returns them as the host
// keeps them (nil fields for none).
func checkAfterMove(notices []string, legs []plugins.LegEvent, opening []string) (AfterMove, error) {
	var out AfterMove
	if len(notices) > maxResumeNotices {
		return AfterMove{}, fmt.Errorf("resume notice: %d declared, at most %d", len(notices), maxResumeNotices)
	}
	for _, n := range notices {
		if err := checkNotice(n, opening); err != nil {
			return AfterMove{}, fmt.Errorf("resume notice %.64q: %w", n, err)
		}
		out.Notices = append(out.Notices, n)
	}
	if len(legs) > maxLegEvents {
		return AfterMove{}, fmt.Errorf("leg events: %d declared, at most %d", len(legs), maxLegEvents)
	}
	for _, l := range legs {
		if l.Echo == "" {
			l.Echo = l.Sent
		}
		switch {
		case !legEvent.MatchString(l.Sent), !legEvent.MatchString(l.Echo):
			return AfterMove{}, fmt.Errorf("leg event %q answered by %q: want [A-Za-z0-9_-], 1 to 32 bytes", l.Sent, l.Echo)
		case !legEventName.MatchString(l.Name):
			return AfterMove{}, fmt.Errorf("leg event %q: name %q: want 1 to 4 dot-separated keys of [A-Za-z0-9_]", l.Sent, l.Name)
		case slices.ContainsFunc(out.Legs, func(o plugins.LegEvent) bool { return o.Echo == l.Echo }):
			return AfterMove{}, fmt.Errorf("leg event %q: answer %q declared twice", l.Sent, l.Echo)
		}
		out.Legs = append(out.Legs, l)
	}
	return out, nil
}

// checkNotice checks one notice template against the opening events.
func checkNotice(n string, opening []string) error {
	if len(n) > maxResumeNoticeSize {
		return fmt.Errorf("%d bytes, at most %d", len(n), maxResumeNoticeSize)
	}
	for _, m := range placeholder.FindAllStringSubmatch(n, -1) {
		if !slices.Contains(opening, m[1]) {
			return fmt.Errorf("placeholder %s names %q, not an event of the declared resume replay %q", m[0], m[1], opening)
		}
	}
	filled := placeholder.ReplaceAllString(n, "null")
	if strings.Contains(filled, "{{") {
		return fmt.Errorf("a placeholder must be a whole JSON string {{event.path}} naming an opening event and 1 to 4 keys")
	}
	var head struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal([]byte(filled), &head); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if head.Event == "" {
		return fmt.Errorf(`no string "event"`)
	}
	return nil
}
