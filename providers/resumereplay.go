package providers

import (
	"fmt"
	"regexp"
	"slices"
)

// maxResumeReplay bounds how many opening messages edge keeps per media
// socket for a takeover: every open socket holds them for its whole call.
const maxResumeReplay = 4

// replayEvent is a declared event name: short and plain, since edge
// compares it with a stream's "event" field as it is and names it in logs
// and metrics.
var replayEvent = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// checkResumeReplay checks a plugin's plugins.Description.ResumeReplay:
// at most maxResumeReplay names, each replayEvent, none twice. It returns
// the declaration as the host keeps it: nil for none.
func checkResumeReplay(events []string) ([]string, error) {
	if len(events) > maxResumeReplay {
		return nil, fmt.Errorf("resume replay: %d declared, at most %d", len(events), maxResumeReplay)
	}
	for i, e := range events {
		if !replayEvent.MatchString(e) {
			return nil, fmt.Errorf("resume replay event %q: want [a-z0-9_-], 1 to 32 bytes", e)
		}
		if slices.Contains(events[:i], e) {
			return nil, fmt.Errorf("resume replay event %q declared twice", e)
		}
	}
	if len(events) == 0 {
		return nil, nil
	}
	return slices.Clone(events), nil
}
