package plugintest

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
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

// noticePlaceholder is a ResumeNotice placeholder: a whole JSON string
// {{event.path}}.
var noticePlaceholder = regexp.MustCompile(`"\{\{([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_]+)+)\}\}"`)

// checkResumeNotice fills each declared notice from the stream's opening
// as edge does after a move: every placeholder must find a value, and the
// notice must be a JSON object with a string "event".
func checkResumeNotice(t *testing.T, notices, opening []string) {
	t.Helper()
	byEvent := map[string]map[string]json.RawMessage{}
	for _, msg := range opening {
		var m map[string]json.RawMessage
		var ev string
		if json.Unmarshal([]byte(msg), &m) == nil && json.Unmarshal(m["event"], &ev) == nil {
			byEvent[ev] = m
		}
	}
	for _, n := range notices {
		filled := noticePlaceholder.ReplaceAllStringFunc(n, func(ph string) string {
			sub := noticePlaceholder.FindStringSubmatch(ph)
			obj, v := byEvent[sub[1]], json.RawMessage(nil)
			for _, k := range strings.Split(sub[2][1:], ".") {
				if v = obj[k]; v == nil {
					t.Errorf("ResumeNotice %s: %s is not in the stream's opening", n, ph)
					return "null"
				}
				obj = nil
				json.Unmarshal(v, &obj)
			}
			return string(v)
		})
		var m struct {
			Event string `json:"event"`
		}
		if err := json.Unmarshal([]byte(filled), &m); err != nil || m.Event == "" {
			t.Errorf("ResumeNotice %s filled is %s: want a JSON object with a string event (%v)", n, filled, err)
		}
	}
}
