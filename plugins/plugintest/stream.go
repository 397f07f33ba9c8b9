package plugintest

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// ReadStream reads a fixture of a provider's media stream: one text
// message a line, as the provider sends it; blank lines are skipped.
func ReadStream(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("stream fixture: %v", err)
	}
	var msgs []string
	for line := range bytes.Lines(b) {
		if line = bytes.TrimSpace(line); len(line) > 0 {
			msgs = append(msgs, string(line))
		}
	}
	return msgs
}

// checkResumeReplay checks a declared ResumeReplay against the stream's
// opening messages the way edge checks a live stream's: each message at
// its position a JSON object whose "event" is the declared name.
func checkResumeReplay(t *testing.T, declared, opening []string) {
	t.Helper()
	if len(declared) != len(opening) {
		t.Errorf("ResumeReplay %q names %d messages; the stream opens with %d", declared, len(declared), len(opening))
		return
	}
	for i, msg := range opening {
		var m struct {
			Event string `json:"event"`
		}
		if err := json.Unmarshal([]byte(msg), &m); err != nil {
			t.Errorf("opening message %d is not a JSON object: %v", i, err)
			continue
		}
		if m.Event != declared[i] {
			t.Errorf("opening message %d has event %q; ResumeReplay[%d] is %q", i, m.Event, i, declared[i])
		}
	}
}
