package mediaurl

import (
	"errors"
	"testing"
	"time"
)

// A URL minted by Signer.URL parses back to its pod, token and path, and
// the token verifies for them; a path or query that could smuggle anything
// to a pod is refused before any lookup.
func TestParseTarget(t *testing.T) {
	s := NewSigner([]byte("secret-secret-secret-secret-0001"), time.Minute)
	u := s.URL("wss://edge.example.com/", "CA1", "pod-a", "/agent/v1")
	const base = "wss://edge.example.com"
	tg, err := ParseTarget(u[len(base):], "x=1")
	if err != nil || tg.Pod != "pod-a" || tg.Path != "/agent/v1" || tg.URI != "/agent/v1?x=1" || tg.Token == "" {
		t.Fatalf("ParseTarget(%q) = %+v, %v", u, tg, err)
	}
	if id, err := s.Verify(tg.Token, tg.Pod, tg.Path); err != nil || id != "CA1" {
		t.Errorf("Verify = %q, %v", id, err)
	}
	for path, want := range map[string]error{
		"/ws/pod/pod-a/agent":          nil,
		"/ws/pod/pod-a":                nil,
		"/other/pod-a/agent":           ErrUnknownPod,
		"/ws/pod/pod:a/agent":          ErrUnknownPod,
		"/ws/pod/../agent":             ErrUnknownPod,
		"/ws/pod/pod-a/%2e%2e/x":       ErrBadPath,
		"/ws/pod/pod-a/a/../b":         ErrBadPath,
		"/ws/pod/pod-a/a//b":           ErrBadPath,
		"/ws/pod/pod-a/a%0d%0aX:%20y":  ErrBadPath,
		"/ws/pod/pod-a/c.tok/agent/ok": nil,
	} {
		if _, err := ParseTarget(path, ""); !errors.Is(err, want) {
			t.Errorf("ParseTarget(%q) = %v, want %v", path, err, want)
		}
	}
	if _, err := ParseTarget("/ws/pod/pod-a/agent", "a=%0d%0a"); !errors.Is(err, ErrBadPath) {
		t.Errorf("a query with CR LF: %v, want ErrBadPath", err)
	}
}
