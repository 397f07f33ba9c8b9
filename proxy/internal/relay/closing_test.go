package relay

import (
	"fmt"
	"testing"
)

// event is one close event told to a Closing.
type event struct {
	kind string // "frame", "stop", "end"
	side Side
	code int
	how  End
}

func frame(from Side, code int) event { return event{kind: "frame", side: from, code: code} }
func stop(code int) event             { return event{kind: "stop", code: code} }
func end(side Side, how End) event    { return event{kind: "end", side: side, how: how} }

func (e event) String() string {
	switch e.kind {
	case "frame":
		return fmt.Sprintf("%s close %d", e.side, e.code)
	case "stop":
		return fmt.Sprintf("edge stop %d", e.code)
	}
	return fmt.Sprintf("%s end %d", e.side, e.how)
}

// apply tells c ev and returns what the event reported: whether a stop was
// recorded, whether an end cost the pod.
func apply(c *Closing, ev event) bool {
	switch ev.kind {
	case "frame":
		c.CloseFrame(ev.side, ev.code)
		return false
	case "stop":
		return c.Stop(ev.code, fmt.Sprint("reason ", ev.code))
	}
	return c.Ended(ev.side, ev.how)
}

// Every order of close events that matters: who is named, with which code,
// what edge still owes each side, and which event, if any, costs the pod.
func TestClosingAttribution(t *testing.T) {
	for name, tc := range map[string]struct {
		events []event
		// reported[i]: events[i] reported true (a stop recorded, a pod blamed).
		reported []bool
		want     Result
		// owes is the close code edge owes the client and the pod after
		// the events.
		owes [2]int
	}{
		"client closes, pod echoes, both end": {
			events: []event{frame(Client, 1000), frame(Pod, 1000), end(Client, EOF), end(Pod, EOF)},
			want:   Result{By: Client, Code: 1000},
		},
		"pod closes, client echoes, both end": {
			events: []event{frame(Pod, 4100), frame(Client, 4100), end(Pod, EOF), end(Client, EOF)},
			want:   Result{By: Pod, Code: 4100},
		},
		"a close frame without a code": {
			events: []event{frame(Client, 1005), end(Client, EOF), end(Pod, EOF)},
			want:   Result{By: Client, Code: 1005},
		},
		"a side's second close frame does not count": {
			events: []event{frame(Pod, 4100), frame(Pod, 1000), frame(Client, 1000)},
			want:   Result{By: Pod, Code: 4100},
		},
		"client FIN without a close frame, the pod closes bare after": {
			events: []event{end(Client, EOF), end(Pod, EOF)},
			want:   Result{By: Client},
		},
		"client reset, the pod resets after": {
			events: []event{end(Client, Failed), end(Pod, Failed)},
			want:   Result{By: Client},
		},
		"client's broken TLS record, the pod stalls after": {
			events: []event{end(Client, Failed), end(Pod, Stalled)},
			want:   Result{By: Client},
		},
		"client's close frame, the pod ends without its echo": {
			events: []event{frame(Client, 1000), end(Pod, EOF), end(Client, EOF)},
			want:   Result{By: Client, Code: 1000},
		},
		"pod reset mid-call": {
			events:   []event{end(Pod, Failed)},
			reported: []bool{true},
			want:     Result{By: Edge, Code: 1014, Reason: "pod lost", Lost: true},
			owes:     [2]int{1014, 0},
		},
		"pod FIN without a close frame": {
			events:   []event{end(Pod, EOF), end(Client, EOF)},
			reported: []bool{true, false},
			want:     Result{By: Edge, Code: 1014, Reason: "pod lost", Lost: true},
		},
		"pod stalls": {
			events:   []event{end(Pod, Stalled)},
			reported: []bool{true},
			want:     Result{By: Edge, Code: 1014, Reason: "pod lost", Lost: true},
			owes:     [2]int{1014, 0},
		},
		"pod FIN after its close frame": {
			events: []event{frame(Pod, 1000), end(Pod, EOF)},
			want:   Result{By: Pod, Code: 1000},
		},
		"pod reset after its close frame": {
			events: []event{frame(Pod, 1011), end(Pod, Failed)},
			want:   Result{By: Pod, Code: 1011},
		},
		"pod's second end does not count twice": {
			events:   []event{end(Pod, Stalled), end(Pod, Failed)},
			reported: []bool{true, false},
			want:     Result{By: Edge, Code: 1014, Reason: "pod lost", Lost: true},
			owes:     [2]int{1014, 0},
		},
		"drain: edge's stop, both echo and end": {
			events:   []event{stop(1001), frame(Pod, 1001), frame(Client, 1001), end(Pod, EOF), end(Client, EOF)},
			reported: []bool{true},
			want:     Result{By: Edge, Code: 1001, Reason: "reason 1001"},
		},
		"drain: edge owes both sides its close": {
			events:   []event{stop(1001)},
			reported: []bool{true},
			want:     Result{By: Edge, Code: 1001, Reason: "reason 1001"},
			owes:     [2]int{1001, 1001},
		},
		"a message over the limit: 1009 both ways": {
			events:   []event{stop(1009)},
			reported: []bool{true},
			want:     Result{By: Edge, Code: 1009, Reason: "reason 1009"},
			owes:     [2]int{1009, 1009},
		},
		"the client's broken framing, then the pod resets": {
			events:   []event{stop(1002), end(Pod, Failed)},
			reported: []bool{true, false},
			want:     Result{By: Edge, Code: 1002, Reason: "reason 1002"},
			owes:     [2]int{1002, 0},
		},
		"a lost lease, then the pod ends without echo": {
			events:   []event{stop(1008), end(Pod, EOF)},
			reported: []bool{true, false},
			want:     Result{By: Edge, Code: 1008, Reason: "reason 1008"},
			owes:     [2]int{1008, 0},
		},
		"the first stop wins": {
			events:   []event{stop(1001), stop(1008)},
			reported: []bool{true, false},
			want:     Result{By: Edge, Code: 1001, Reason: "reason 1001"},
			owes:     [2]int{1001, 1001},
		},
		"a stop after the pod was lost": {
			events:   []event{end(Pod, Failed), stop(1001)},
			reported: []bool{true, false},
			want:     Result{By: Edge, Code: 1014, Reason: "pod lost", Lost: true},
			owes:     [2]int{1014, 0},
		},
		"a stop after the client's close frame: nothing more to the pod": {
			events:   []event{frame(Client, 1000), stop(1001)},
			reported: []bool{false, true},
			want:     Result{By: Edge, Code: 1001, Reason: "reason 1001"},
			owes:     [2]int{1001, 0},
		},
		"a stop racing the client's reset": {
			events:   []event{end(Client, Failed), stop(1001)},
			reported: []bool{false, true},
			want:     Result{By: Edge, Code: 1001, Reason: "reason 1001"},
			owes:     [2]int{0, 1001},
		},
		"idle timeout": {
			events:   []event{stop(4000), end(Client, Failed)},
			reported: []bool{true, false},
			want:     Result{By: Edge, Code: 4000, Reason: "reason 4000"},
			owes:     [2]int{0, 4000},
		},
		"torn down before anything": {
			want: Result{By: None},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var c Closing
			for i, ev := range tc.events {
				want := i < len(tc.reported) && tc.reported[i]
				if got := apply(&c, ev); got != want {
					t.Errorf("%s: reported %v, want %v", ev, got, want)
				}
			}
			if got := c.Result(); got != tc.want {
				t.Errorf("result %+v, want %+v", got, tc.want)
			}
			for i, to := range []Side{Client, Pod} {
				if got, _ := c.Owes(to); got != tc.owes[i] {
					t.Errorf("owes %s %d, want %d", to, got, tc.owes[i])
				}
			}
			if c.Stopped() != (tc.want.By == Edge) {
				t.Errorf("stopped %v with result %+v", c.Stopped(), tc.want)
			}
		})
	}
}

// Only the pod's own end costs the pod, and only as the first thing that
// happens to the socket's close: every order of up to four events drawn
// from what a client can do (a close frame, its stream's end or failure,
// framing that draws 1002, a message that draws 1009), what a pod can do
// (a close frame, its FIN, reset or stall) and edge's drain blames the
// pod exactly when the pod's end comes first.
func TestOnlyThePodsOwnEndBlamesIt(t *testing.T) {
	events := []event{
		frame(Client, 1000), end(Client, EOF), end(Client, Failed), stop(1002), stop(1009),
		frame(Pod, 1000), end(Pod, EOF), end(Pod, Failed), end(Pod, Stalled), stop(1001),
	}
	podEnd := func(ev event) bool { return ev.kind == "end" && ev.side == Pod }
	var walk func(seq []event)
	checked := 0
	walk = func(seq []event) {
		if len(seq) > 0 {
			checked++
			var c Closing
			lostAt := -1
			for i, ev := range seq {
				if apply(&c, ev) && ev.kind == "end" {
					if lostAt >= 0 {
						t.Fatalf("%v: blamed twice", seq)
					}
					lostAt = i
				}
			}
			wantLost := podEnd(seq[0])
			if (lostAt == 0) != wantLost || lostAt > 0 {
				t.Fatalf("%v: pod blamed at event %d, want blamed %v (at the first event only)", seq, lostAt, wantLost)
			}
			if r := c.Result(); r.Lost != wantLost || wantLost && (r.By != Edge || r.Code != 1014) {
				t.Fatalf("%v: result %+v", seq, r)
			}
			if code, _ := c.Owes(Client); wantLost && !c.HasEnded(Client) && code != 1014 {
				t.Fatalf("%v: a lost pod's client is owed %d, want 1014", seq, code)
			}
		}
		if len(seq) == 4 {
			return
		}
		for _, ev := range events {
			walk(append(seq[:len(seq):len(seq)], ev))
		}
	}
	walk(nil)
	if want := 10 + 100 + 1000 + 10000; checked != want {
		t.Fatalf("checked %d orders, want %d", checked, want)
	}
}

// The close handshake's phases: the close frames go out within
// CloseGrace, then the peers are drained until both end their streams or
// LingerTime passes; a torn-down socket takes no stop and blames no pod.
func TestClosingPhases(t *testing.T) {
	const ms = int64(1e6)
	var c Closing
	if c.Shut(0) || c.Over(1<<62) {
		t.Fatal("an open socket shut or over")
	}
	if !c.Begin(10*ms) || c.Begin(20*ms) {
		t.Fatal("Begin: want true once")
	}
	if c.Phase() != PhaseClosing || c.Deadline() != 10*ms+int64(CloseGrace) {
		t.Fatalf("phase %d deadline %d", c.Phase(), c.Deadline())
	}
	if c.Over(10*ms + int64(CloseGrace)) {
		t.Error("over at the grace's end, want after it")
	}
	if !c.Over(10*ms + int64(CloseGrace) + 1) {
		t.Error("not over after the grace")
	}
	c.Ended(Client, EOF)
	c.Ended(Pod, EOF)
	if c.Over(11 * ms) {
		t.Error("over before edge's last bytes are out, though both sides ended")
	}
	if !c.Shut(50*ms) || c.Shut(60*ms) {
		t.Fatal("Shut: want true once")
	}
	if c.Phase() != PhaseShut || c.Deadline() != 50*ms+int64(LingerTime) {
		t.Fatalf("phase %d deadline %d", c.Phase(), c.Deadline())
	}
	if !c.Over(50 * ms) {
		t.Error("shut with both sides ended, not over")
	}

	var l Closing
	l.Begin(0)
	l.Shut(0)
	l.Ended(Client, EOF)
	if l.Over(int64(LingerTime)) {
		t.Error("over while the pod lingers within LingerTime")
	}
	if !l.Over(int64(LingerTime) + 1) {
		t.Error("not over after LingerTime")
	}
	l.TornDown()
	if l.Phase() != PhaseDone || l.Stop(1001, "late") || l.Ended(Pod, Failed) {
		t.Error("a torn-down socket took a stop or blamed its pod")
	}
	if r := l.Result(); r != (Result{By: Client}) {
		t.Errorf("result %+v", r)
	}
}
