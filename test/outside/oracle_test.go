package outside

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edge-voice/edge/internal/fakeagent"
)

// outsideWindow is one scenario's timeline.
type outsideWindow struct {
	since, injected, faultEnd, lastEnd time.Time
	due                                time.Time     // every pod back by then
	freeAfter                          time.Duration // from lastEnd until every pod was back
	freed                              bool
	refused                            int64  // connections the balancer reset
	stuck                              string // the pools at due, when not all free
	samples                            []outsideSample
	// outage: the fault takes every replica down on purpose, so an empty
	// balancer and cut calls are the fault itself.
	outage bool
}

// outsideSample is the calls edge counts in progress and the pods it
// offers, per tier, at one moment (between at and done), from its status
// page.
type outsideSample struct {
	at, done         time.Time
	calls, available map[string]int
}

// sampleCalls records /api/v1/status's calls in progress every second
// until stop is closed; a sample Redis cannot answer is left out.
func (r *outsideRig) sampleCalls(stop <-chan struct{}) <-chan []outsideSample {
	out := make(chan []outsideSample, 1)
	go func() {
		var samples []outsideSample
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			at := time.Now()
			if p, err := r.pools(); err == nil {
				s := outsideSample{at: at, done: time.Now(), calls: map[string]int{}, available: map[string]int{}}
				for tier, st := range p {
					s.calls[tier], s.available[tier] = st.Calls, st.Available
				}
				samples = append(samples, s)
			}
			select {
			case <-tick.C:
			case <-stop:
				out <- samples
				return
			}
		}
	}()
	return out
}

// outsidePodsBackWithin is how long after the last call ended every pod
// must be back in its pool: a call's end frees its pod at once, and a dead
// replica's calls must free theirs within 15 s of its death.
const outsidePodsBackWithin = 20 * time.Second

// judge holds what the pods and the provider saw against edge's promises
// and reports the scenario's figures. Every broken promise fails the test.
func (r *outsideRig) judge(t *testing.T, w outsideWindow, calls []*outsideCall) {
	t.Helper()
	byID := map[string]*outsideCall{}
	for _, c := range calls {
		byID[c.ID] = c
	}
	r.mu.Lock()
	killed := map[string]bool{}
	for name := range r.sigkilled {
		killed[name] = true
	}
	r.mu.Unlock()
	// mayDie: a call whose socket went through a replica killed -9 (or
	// every call, when the fault is every replica's death).
	mayDie := func(c *outsideCall) bool { return w.outage || killed[c.Replica] }

	var (
		stream, hangup, fallback, noAnswer, other, cappedRefused int
		opened, completed, cut, cutAllowed, foreign              int
		notOpened, spoken, wrong, cutWrong, echoes               []string
		cutCodes                                                 = map[string]int{}
		lastRefusal, firstAfter                                  time.Time
	)
	for _, c := range calls {
		switch {
		case c.Answer == "stream":
			stream++
			if c.Sent.After(w.faultEnd) && (firstAfter.IsZero() || c.Sent.Before(firstAfter)) {
				firstAfter = c.Sent
			}
		case c.Merchant == outsideCapped && (c.Answer == "hangup" || c.Status >= 500 || c.Status == 429):
			// A refusal about the call itself keeps the provider's markup.
			cappedRefused++
		case c.Status == 0:
			noAnswer++ // Twilio runs the fallback URL
		case c.Status >= 500:
			fallback++ // Twilio runs the fallback URL
		case c.Answer == "hangup":
			hangup++
			spoken = append(spoken, fmt.Sprintf("%s at +%s: %d", c.ID, c.Sent.Sub(w.injected).Round(100*time.Millisecond), c.Status))
		default:
			other++
			spoken = append(spoken, fmt.Sprintf("%s at +%s: %d %.120q", c.ID, c.Sent.Sub(w.injected).Round(100*time.Millisecond), c.Status, c.Body))
		}
		if c.Answer != "stream" && c.Merchant != outsideCapped && c.Sent.After(lastRefusal) {
			lastRefusal = c.Sent
		}
		if c.Answer != "stream" {
			continue
		}
		switch {
		case !c.Opened:
			if !mayDie(c) {
				notOpened = append(notOpened, fmt.Sprintf("%s at +%s via %s: %d %s", c.ID, c.Sent.Sub(w.injected).Round(100*time.Millisecond), c.Replica, c.DialStatus, outsideShort(c.DialErr)))
			}
		case c.Cut:
			opened++
			cut++
			cutCodes[fmt.Sprint(int(c.CloseCode))]++
			if mayDie(c) {
				cutAllowed++
			} else {
				cutWrong = append(cutWrong, fmt.Sprintf("%s via %s at +%s (close %d)", c.ID, c.Replica, c.Ended.Sub(w.injected).Round(100*time.Millisecond), c.CloseCode))
			}
		default:
			opened++
			completed++
		}
		if c.Foreign > 0 {
			foreign += c.Foreign
			echoes = append(echoes, fmt.Sprintf("%s heard %d frames of %s", c.ID, c.Foreign, c.FirstAlien))
		}
	}

	// The pods' account.
	sessions := r.rec.Sessions()
	overlaps := r.rec.Overlaps(w.since, r.limit)
	var podForeign int
	var capped []fakeagent.Session
	for _, s := range sessions {
		if !s.Closed.IsZero() && s.Closed.Before(w.since) {
			continue
		}
		podForeign += s.Foreign
		c, ok := byID[s.CallID]
		if !ok {
			continue
		}
		tier := r.tierOf[s.Pod]
		switch {
		case c.Merchant == outsideRouted && tier != "silver":
			wrong = append(wrong, fmt.Sprintf("%s (%s) served by %s at +%s", c.ID, c.Merchant, s.Pod, s.Opened.Sub(w.injected).Round(100*time.Millisecond)))
		case c.Merchant != outsideRouted && tier == "silver":
			wrong = append(wrong, fmt.Sprintf("%s (%s) served by silver pod %s", c.ID, c.Merchant, s.Pod))
		}
		if c.Merchant == outsideCapped {
			capped = append(capped, s)
		}
	}
	cappedPeak := outsidePeak(capped)

	t.Logf("calls: %d placed, %d answered with a pod, %d sockets opened, %d completed, %d cut (%d through a replica killed -9; close codes %v)",
		len(calls), stream, opened, completed, cut, cutAllowed, cutCodes)
	t.Logf("refusals: %d fallback 5xx, %d no answer (balancer reset %d connections), %d spoken hangups and %d other answers for merchants with room, %d refusals of the capped merchant",
		fallback, noAnswer, w.refused, hangup, other, cappedRefused)
	if !lastRefusal.IsZero() && lastRefusal.After(w.injected) {
		t.Logf("calls refused until +%s after the fault", lastRefusal.Sub(w.injected).Round(100*time.Millisecond))
	}
	if !firstAfter.IsZero() {
		t.Logf("first call answered with a pod after the fault ended: +%s", firstAfter.Sub(w.faultEnd).Round(100*time.Millisecond))
	}
	outages := r.bal.Outages(w.since)
	var dark time.Duration
	for _, o := range outages {
		dark += o.To.Sub(o.From)
	}
	t.Logf("balancer: %d stretches with no ready replica, %s in all", len(outages), dark.Round(100*time.Millisecond))
	if w.freed {
		t.Logf("every pod back in its pool %s after the last call ended (%s after the fault)", w.freeAfter.Round(100*time.Millisecond), w.lastEnd.Add(w.freeAfter).Sub(w.injected).Round(100*time.Millisecond))
	} else {
		t.Logf("pods not all back in their pools %s after the last call ended: %s", w.freeAfter.Round(time.Second), r.poolsText())
	}
	most, heldFor := r.outsideHeld(w.samples, calls, sessions)
	t.Logf("pods held for calls that are gone (status page against the pods): at most %d at once; the longest stretch %s", most, heldFor.Round(time.Second))
	var longest time.Duration
	pods := map[string]bool{}
	for _, o := range overlaps {
		longest = max(longest, o.Duration())
		pods[o.Pod] = true
	}
	t.Logf("pods: %d served more calls at once than allowed (%d times, the longest %s); capped merchant peak %d of max_calls %d",
		len(pods), len(overlaps), longest.Round(100*time.Millisecond), cappedPeak, r.maxCalls)

	// The promises.
	if len(overlaps) > 0 {
		var ex []string
		for _, o := range overlaps[:min(len(overlaps), 5)] {
			ex = append(ex, fmt.Sprintf("%s (%s) served %d at once for %s from +%s: %v", o.Pod, r.tierOf[o.Pod], o.Most, o.Duration().Round(10*time.Millisecond), o.From.Sub(w.injected).Round(100*time.Millisecond), o.Calls))
		}
		t.Errorf("a pod served more calls at once than its tier allows, %d times on %d pods, e.g.\n  %s", len(overlaps), len(pods), strings.Join(ex, "\n  "))
	}
	if foreign > 0 || podForeign > 0 {
		t.Errorf("calls heard other calls: %d foreign echoes at the provider, %d foreign frames at the pods; %v", foreign, podForeign, outsideFirst(echoes))
	}
	if len(notOpened) > 0 {
		t.Errorf("%d calls answered with a pod got no media socket: %v", len(notOpened), outsideFirst(notOpened))
	}
	if len(cutWrong) > 0 {
		t.Errorf("%d calls cut mid-call though their replica lived: %v", len(cutWrong), outsideFirst(cutWrong))
	}
	if len(spoken) > 0 {
		t.Errorf("%d calls of merchants with room were answered 2xx/4xx without a pod (the caller hears a hangup; the number's fallback URL never runs): %v", len(spoken), outsideFirst(spoken))
	}
	if len(wrong) > 0 {
		t.Errorf("%d calls served against their merchant's policy: %v", len(wrong), outsideFirst(wrong))
	}
	if cappedPeak > r.maxCalls {
		t.Errorf("the capped merchant had %d calls on pods at once, max_calls %d", cappedPeak, r.maxCalls)
	}
	if !w.outage && len(outages) > 0 {
		t.Errorf("the balancer had no ready replica %d times, %s in all, while replicas ran", len(outages), dark.Round(100*time.Millisecond))
	}
	if heldFor > outsidePodsBackWithin {
		t.Errorf("pods were held for calls that are gone, offered to nobody, for %s on end, up to %d at once; a dead call must free its pod within %s", heldFor.Round(time.Second), most, outsidePodsBackWithin)
	}
	if !w.freed || w.lastEnd.Add(w.freeAfter).After(w.due) {
		t.Errorf("pods were not all back in their pools within %s of the last call's end (took %s, done: %v); the status page then: %s", w.due.Sub(w.lastEnd).Round(time.Second), w.freeAfter.Round(100*time.Millisecond), w.freed, w.stuck)
	}
}

// outsideHeldSlack is how long a call the provider was answered for may
// hold its pod without a socket: the lease (allocator.lease_ttl, 60 s by
// default) is the window for its socket, and the sweep (30 s) gives the
// pod back after it.
const outsideHeldSlack = 90 * time.Second

// outsideHeld finds pods held for calls that are gone, two ways, at each
// sample. Calls edge counts in progress, less what the pods and the
// provider say is going on (calls the pods serve, calls answered whose
// socket is not open yet, calls that ended in the last second: their
// release is in flight). And pods idle at the agents that edge does not
// offer, less those waiting for an answered call's socket or a release in
// flight: this also sees a pod that left its pool with no call recorded.
// It returns the most at once and the longest stretch of samples with
// any.
func (r *outsideRig) outsideHeld(samples []outsideSample, calls []*outsideCall, sessions []fakeagent.Session) (most int, longest time.Duration) {
	var start, last time.Time
	for _, s := range samples {
		counted := 0
		for _, n := range s.calls {
			counted += n
		}
		explained := 0
		busy := map[string]bool{} // pods serving a socket during the sample
		for _, ss := range sessions {
			if !ss.Opened.After(s.done) && (ss.Closed.IsZero() || !ss.Closed.Before(s.at)) {
				explained++
				busy[ss.Pod] = true
			}
		}
		waiting := map[string]int{} // per tier: pods allocated, not serving
		for _, c := range calls {
			if c.Answer != "stream" || c.Answered.After(s.done) {
				continue
			}
			switch {
			case !c.Opened && s.at.Sub(c.Answered) < outsideHeldSlack:
				// its socket may still come
			case c.Opened && c.OpenedAt.After(s.at):
				// answered, socket on its way
			case c.Opened && !c.Ended.IsZero() && !c.Ended.Before(s.at.Add(-time.Second)) && !c.Ended.After(s.done):
				// ended, release in flight
			default:
				continue
			}
			explained++
			waiting[r.tierOf[c.Pod]]++
		}
		held := counted - explained
		idleHeld := 0
		// A shared pod with room stays offered: idle pods of a shared tier
		// that it does not offer are held too (partly busy ones it offers
		// hide some, never add one).
		for _, tier := range []string{"gold", "silver", "bronze"} {
			idle := 0
			for pod, t := range r.tierOf {
				if t == tier && !busy[pod] {
					idle++
				}
			}
			idleHeld += max(0, idle-s.available[tier]-waiting[tier])
		}
		held = max(held, idleHeld)
		most = max(most, held)
		switch {
		case held > 0 && start.IsZero():
			start, last = s.at, s.done
		case held > 0:
			last = s.done
		case !start.IsZero():
			longest = max(longest, last.Sub(start))
			start = time.Time{}
		}
	}
	if !start.IsZero() {
		longest = max(longest, last.Sub(start))
	}
	return most, longest
}

// outsidePeak is the most sessions open at once.
func outsidePeak(ss []fakeagent.Session) int {
	type ev struct {
		at time.Time
		d  int
	}
	var evs []ev
	now := time.Now()
	for _, s := range ss {
		end := s.Closed
		if end.IsZero() {
			end = now
		}
		evs = append(evs, ev{s.Opened, 1}, ev{end, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d // ends first
	})
	n, peak := 0, 0
	for _, e := range evs {
		n += e.d
		peak = max(peak, n)
	}
	return peak
}

func outsideFirst(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], "; ") + fmt.Sprintf("; and %d more", len(s)-5)
	}
	return strings.Join(s, "; ")
}

func outsideShort(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
