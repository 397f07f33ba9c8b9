package edgetest

import (
	"io"
	"strings"
	"testing"
	"time"
)

// Edge reports its bound listeners in either log format, with attributes
// of the logger itself before the line's own; the launcher finds each,
// and a line waited for wakes the waiter.
func TestReadFindsListenersInBothFormats(t *testing.T) {
	p := &Process{done: make(chan struct{}), logged: make(chan struct{}), listeners: map[string]string{}}
	log := strings.Join([]string{
		`time=2026-01-01T00:00:00Z level=INFO msg=listening replica=edge-0 listener=public addr=[::]:8080 tls=false`,
		`time=2026-01-01T00:00:00Z level=INFO msg=listening listener=admin addr=127.0.0.1:9090 tls=true`,
		`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"listening","replica":"edge-1","listener":"internal","addr":"127.0.0.1:7070","tls":false}`,
		`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"listening","listener":"metrics","addr":"127.0.0.1:6060","tls":true}`,
		`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"edge is ready","public":"http://127.0.0.1:8080"}`,
	}, "\n") + "\n"
	p.read(strings.NewReader(log))
	for name, want := range map[string]string{
		"public": "http://127.0.0.1:8080", "admin": "https://127.0.0.1:9090",
		"internal": "http://127.0.0.1:7070", "metrics": "https://127.0.0.1:6060",
	} {
		if got := p.Listener(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if !p.WaitReady(0) {
		t.Error("the JSON ready line was not seen")
	}
	if p.WaitLog(0, "no such line") {
		t.Error("a line never written was found")
	}
}

// A waiter wakes at the line it waits for, not at a timer.
func TestWaitLogWakesAtTheLine(t *testing.T) {
	p := &Process{done: make(chan struct{}), logged: make(chan struct{}), listeners: map[string]string{}}
	r, w := io.Pipe()
	go p.read(r)
	found := make(chan bool)
	go func() { found <- p.WaitLog(time.Minute, "the line") }()
	io.WriteString(w, "another line\n")
	io.WriteString(w, "and the line\n")
	if !<-found {
		t.Fatal("WaitLog did not see the line")
	}
	w.Close()
}
