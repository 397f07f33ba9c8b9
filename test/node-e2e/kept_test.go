package nodee2e

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// keptMerchant is the one merchant the overlay opts in to proxy.resume
// (overlay/edge.yaml): its calls move to another pod when theirs dies.
const keptMerchant = "kept"

// callRecord is edge's record of a call (admin API /api/v1/calls/{sid}).
type callRecord struct {
	State       string    `json:"state"`
	Pod         string    `json:"pod_name"`
	MovedFrom   []string  `json:"moved_from"`
	Resumptions int       `json:"resumptions"`
	ResumedAt   time.Time `json:"resumed_at"`
	How         string    `json:"how"`
	ReleasedBy  string    `json:"released_by"`
	SocketEnd   string    `json:"socket_end"`
	ClosedBy    string    `json:"closed_by"`
	CloseCode   string    `json:"close_code"`
}

func (c *cluster) callRecord(sid string) (callRecord, error) {
	var rec callRecord
	err := c.admin.get("/api/v1/calls/"+sid, &struct {
		Call *callRecord `json:"call"`
	}{&rec})
	return rec, err
}

// agentDeletedKept: an agent pod force-deleted while it holds a call of
// the merchant opted in to proxy.resume. The provider's socket never
// closes: its echoes go on, in order, from another instance, which got
// Edge-Resumed: 1 and the stream's connected and start again; edge's
// record counts the move; the caller's hang-up ends and releases the call
// as any other; the StatefulSet's replacement takes calls. The same
// delete of a call not opted in ends it with 1014 (agentDeleted).
func (c *cluster) agentDeletedKept(t *testing.T) {
	t0 := time.Now()
	lc, err := c.provider.dial(keptMerchant)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.end()
	// find returns the first event since t0 of the call that ok accepts.
	find := func(ok func(event) bool) (event, bool) {
		for _, e := range c.rec.since(t0) {
			if ok(e) {
				return e, true
			}
		}
		return event{}, false
	}
	// await waits for an event, or for the call to end first, which fails
	// the test with what the provider saw.
	await := func(what string, timeout time.Duration, ok func(event) bool) event {
		t.Helper()
		var e event
		found := false
		c.waitFor(what, timeout, func() bool {
			e, found = find(ok)
			return found || lc.over()
		}, nil)
		if !found {
			t.Fatalf("the call ended before %s: %s", what, lc.outcome())
		}
		return e
	}
	on := await("the call on an agent", 20*time.Second, func(e event) bool { return e.Kind == "call" && e.Call == lc.Sid })
	c.waitFor("a second of echoed media", 10*time.Second, func() bool { return lc.echoesFrom(0) >= 50 || lc.over() }, nil)
	if lc.over() {
		t.Fatalf("the call on %s ended before its pod was deleted: %s", on.Pod, lc.outcome())
	}

	deleted := time.Now()
	stopWatch := c.watchPods(on.Pod, deleted)
	defer stopWatch()
	c.mustKubectl("-n", ns, "delete", "pod", on.Pod, "--grace-period=0", "--force", "--wait=false")
	moved := await("the call on another agent", 30*time.Second, func(e event) bool {
		return e.Kind == "call" && e.Call == lc.Sid && e.instance() != on.instance()
	})
	first := await("media on "+moved.Pod, 10*time.Second, func(e event) bool {
		return e.Kind == "media" && e.instance() == moved.instance() && e.Path == moved.Path
	})
	firstSeq, err := strconv.Atoi(strings.TrimPrefix(first.Note, "sequenceNumber "))
	if err != nil {
		t.Fatalf("%s's first media: %q", moved.Pod, first.Note)
	}
	// Two seconds of the stream after the move, echoed.
	c.waitFor("100 echoes after the move", 15*time.Second, func() bool { return lc.echoesFrom(firstSeq) >= 100 || lc.over() }, nil)
	if lc.over() {
		t.Fatalf("the call ended after it moved to %s: %s", moved.Pod, lc.outcome())
	}

	// edge's record, while the call lives on the new pod.
	rec, err := c.callRecord(lc.Sid)
	t.Logf("edge's record of %s after the move: %+v %v", lc.Sid, rec, err)
	switch {
	case err != nil:
		t.Errorf("edge's record of %s: %v", lc.Sid, err)
	case rec.State != "live" || rec.Pod != moved.Pod:
		t.Errorf("edge's record of %s: state %q on %q, want live on %s", lc.Sid, rec.State, rec.Pod, moved.Pod)
	case rec.Resumptions != 1 || !slices.Contains(rec.MovedFrom, on.Pod):
		t.Errorf("edge's record of %s: %d resumptions, moved from %v; want 1, from %s", lc.Sid, rec.Resumptions, rec.MovedFrom, on.Pod)
	}

	lc.end()
	t.Logf("call %s: %s", lc.Sid, lc.outcome())
	if lc.err != "" {
		t.Errorf("the provider's stream broke: %s", lc.outcome())
	}
	judgeGap(t, lc.echoes, firstSeq, deleted, on, moved)

	// What the agents saw: the new one got the move's header and the
	// opening again, then the caller's close.
	open, _ := find(func(e event) bool {
		return e.Kind == "open" && e.instance() == moved.instance() && e.Path == moved.Path
	})
	if open.Note != "Edge-Resumed: 1" {
		t.Errorf("%s (%s) opened the moved call with %q, want Edge-Resumed: 1", moved.Pod, moved.IP, open.Note)
	}
	if moved.Note != "opening connected,start" {
		t.Errorf("%s (%s) got %q before the moved call's media, want connected then start", moved.Pod, moved.IP, moved.Note)
	}
	// The call is over here (the caller hung up): await's end-of-call
	// check does not apply.
	var closed event
	c.waitFor("the caller's close on "+moved.Pod, 10*time.Second, func() bool {
		var ok bool
		closed, ok = find(func(e event) bool {
			return e.Kind == "close" && e.instance() == moved.instance() && e.Path == moved.Path
		})
		return ok
	}, nil)
	if closed.Code != 1000 {
		t.Errorf("the moved call closed on %s with %d, not the caller's 1000: %s", moved.Pod, closed.Code, closed.Note)
	}
	for _, e := range c.rec.since(t0) {
		if e.instance() == on.instance() || e.instance() == moved.instance() {
			t.Logf("%s (%s): %s %s %s %d %s", e.Pod, e.IP, clock(e.At), e.Kind, e.Call, e.Code, e.Note)
		}
	}

	// Released as the caller ended it.
	c.waitFor("edge's record of "+lc.Sid+" ended", 10*time.Second, func() bool {
		rec, err = c.callRecord(lc.Sid)
		return err == nil && rec.State == "ended"
	}, nil)
	t.Logf("edge's record of %s at its end: %+v", lc.Sid, rec)
	if rec.Resumptions != 1 || !slices.Contains(rec.MovedFrom, on.Pod) {
		t.Errorf("edge's ended record of %s: %d resumptions, moved from %v", lc.Sid, rec.Resumptions, rec.MovedFrom)
	}
	// What started the move, as edge tells it: the pod's death (the kubelet
	// killed it holding the socket) or its leaving the registry (edge
	// closed the socket to it on its next renewal).
	for _, l := range c.logs.lines("edge-", "moving the call", "the call moved to another pod") {
		if strings.Contains(l, lc.Sid) {
			t.Log(l)
		}
	}
	resumed := 0.0
	for _, p := range c.pods("app=edge") {
		for _, l := range c.admin.metricLines("http://"+p.Status.PodIP+":9090", "edge_proxy_resumptions_total") {
			t.Logf("%s: %s", p.Name, l)
			if v, ok := strings.CutPrefix(l, `edge_proxy_resumptions_total{outcome="resumed"} `); ok {
				f, _ := strconv.ParseFloat(v, 64)
				resumed += f
			}
		}
	}
	if resumed != 1 {
		t.Errorf("edge_proxy_resumptions_total{outcome=\"resumed\"} sums to %v over the edge pods, want 1", resumed)
	}
	c.waitReplaced(on.Pod)
}

// judgeGap logs where the stream picked up on the new pod: the dead pod's
// last echo, the first of the new one (media firstSeq), the gap between
// them and the messages lost with the dead pod.
func judgeGap(t *testing.T, echoes []echoed, firstSeq int, deleted time.Time, on, moved event) {
	t.Helper()
	i := slices.IndexFunc(echoes, func(e echoed) bool { return e.Seq == firstSeq })
	if i < 1 {
		t.Errorf("no echo of media %d, the first %s (%s) got, after an echo of %s's", firstSeq, moved.Pod, moved.IP, on.Pod)
		return
	}
	prev, next := echoes[i-1], echoes[i]
	widest := time.Duration(0)
	for j := 1; j < len(echoes); j++ {
		if d := echoes[j].At.Sub(echoes[j-1].At); d > widest && echoes[j].At.After(deleted) {
			widest = d
		}
	}
	t.Logf("%s (%s) echoed media %d last, %v after the delete; %s (%s) echoed media %d first, %v after the delete: a gap of %v in echoed media, %d messages lost with the dead pod; widest gap after the delete %v",
		on.Pod, on.IP, prev.Seq, prev.At.Sub(deleted).Round(time.Millisecond), moved.Pod, moved.IP, next.Seq,
		next.At.Sub(deleted).Round(time.Millisecond), next.At.Sub(prev.At).Round(time.Millisecond), next.Seq-prev.Seq-1,
		widest.Round(time.Millisecond))
}

// waitReplaced waits for the StatefulSet's replacement of a deleted agent
// pod, under the same name, to take calls: the deleted pod's preStop,
// which runs on after the delete, drains only its own instance.
func (c *cluster) waitReplaced(pod string) {
	c.t.Helper()
	c.waitRollout("statefulset/voice-agent", 5*time.Minute)
	c.waitFor("edge has the 4 agents in its pools", time.Minute, func() bool { return c.admin.pooled() == 4 }, nil)
	var rec podRecord
	c.waitFor("the replacement of "+pod+" available in edge's pools", 20*time.Second, func() bool {
		rec = podRecord{}
		err := c.admin.get("/api/v1/pod/"+pod, &struct {
			Pod *podRecord `json:"pod"`
		}{&rec})
		return err == nil && rec.Status == "available" && !rec.Draining
	}, nil)
}
