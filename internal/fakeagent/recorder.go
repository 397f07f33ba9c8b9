package fakeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Recorder is the pods' own account of the calls they served: every media
// socket each pod accepted, when it opened and closed, which call it
// carried (the Twilio "start" message's callSid) and whether any frame on
// it named another call's stream. Fault tests hold it against what edge
// promises from the outside: an exclusive pod serves one call at a time, a
// shared one at most its max_concurrent, and no call hears another.
//
// One Recorder serves any number of agents (Agent.Record names the pod).
// Its methods are safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	sessions []*Session
	live     map[string]int
	peak     map[string]int
	// changed is closed and replaced whenever a socket opens, starts or
	// closes, so that Wait needs no polling.
	changed chan struct{}
}

// Session is one media socket a pod served.
type Session struct {
	Pod string
	// CallID and StreamSID come from the socket's Twilio "start" message
	// ("" until it arrived); Params are its customParameters (the
	// <Parameter>s edge put in its TwiML).
	CallID, StreamSID string
	Params            map[string]string
	// Opened is when the agent accepted the socket; Closed when it read
	// the end of it (zero while it is open). The pod serves the call in
	// between: a new call's socket can only reach it after edge learned of
	// the previous call's end, which comes after the agent read it.
	Opened, Closed time.Time
	// Frames counts the media frames read; Foreign those naming a stream
	// other than the socket's own (two calls on one socket).
	Frames, Foreign int
	// CloseCode is the close status read from edge (-1: the connection
	// ended without a close frame).
	CloseCode websocket.StatusCode
}

// Overlap is a stretch of time during which a pod served more sockets than
// its limit.
type Overlap struct {
	Pod      string
	From, To time.Time
	// Most is the largest number of sockets open at once in the stretch.
	Most int
	// Calls are the call ids of every socket open during the stretch.
	Calls []string
}

// Duration is how long the overlap lasted.
func (o Overlap) Duration() time.Duration { return o.To.Sub(o.From) }

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{live: map[string]int{}, peak: map[string]int{}, changed: make(chan struct{})}
}

// Record makes the agent report its sockets to r as pod's. Call it before
// the agent takes sockets meant to be counted.
func (a *Agent) Record(r *Recorder, pod string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rec, a.pod = r, pod
}

func (r *Recorder) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Recorder) open(pod string) *Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &Session{Pod: pod, Opened: time.Now()}
	r.sessions = append(r.sessions, s)
	r.live[pod]++
	r.peak[pod] = max(r.peak[pod], r.live[pod])
	r.notify()
	return s
}

func (r *Recorder) close(s *Session, code websocket.StatusCode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Closed, s.CloseCode = time.Now(), code
	r.live[s.Pod]--
	r.notify()
}

// twilioMessage is the part of a Twilio Media Streams message the recorder
// reads.
type twilioMessage struct {
	Event     string `json:"event"`
	StreamSID string `json:"streamSid"`
	Start     *struct {
		CallSID          string            `json:"callSid"`
		StreamSID        string            `json:"streamSid"`
		CustomParameters map[string]string `json:"customParameters"`
	} `json:"start"`
}

// frame reads one message of s. Anything but a Twilio JSON message is
// counted as neither media nor foreign.
func (r *Recorder) frame(s *Session, msg []byte) {
	if !bytes.HasPrefix(msg, []byte("{")) {
		return
	}
	var m twilioMessage
	if json.Unmarshal(msg, &m) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Event == "start" && m.Start != nil {
		if s.StreamSID == "" {
			s.CallID, s.StreamSID, s.Params = m.Start.CallSID, m.Start.StreamSID, m.Start.CustomParameters
			r.notify()
			return
		}
		if m.Start.StreamSID != s.StreamSID {
			s.Foreign++ // a second call's start on a socket already serving one
		}
		return
	}
	if m.Event == "media" {
		s.Frames++
	}
	if m.StreamSID != "" && s.StreamSID != "" && m.StreamSID != s.StreamSID {
		s.Foreign++
	}
}

// Sessions returns a copy of every session so far, in the order they
// opened.
func (r *Recorder) Sessions() []Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Session, len(r.sessions))
	for i, s := range r.sessions {
		out[i] = *s
	}
	return out
}

// Live is how many sockets pod has open now ("" for every pod).
func (r *Recorder) Live(pod string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pod != "" {
		return r.live[pod]
	}
	n := 0
	for _, v := range r.live {
		n += v
	}
	return n
}

// Started is how many open sockets have had their start message.
func (r *Recorder) Started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.sessions {
		if s.Closed.IsZero() && s.CallID != "" {
			n++
		}
	}
	return n
}

// Peak is the most sockets pod ever had open at once.
func (r *Recorder) Peak(pod string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak[pod]
}

// Wait returns once cond holds (checked again after every change the
// recorder sees) or ctx ends. cond may call the recorder's methods.
func (r *Recorder) Wait(ctx context.Context, cond func() bool) error {
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Overlaps returns every stretch of time in which a pod had more sockets
// open than limit(pod), counting the sessions open at or after since (a
// session still open counts until now).
func (r *Recorder) Overlaps(since time.Time, limit func(pod string) int) []Overlap {
	now := time.Now()
	perPod := map[string][]Session{}
	for _, s := range r.Sessions() {
		if !s.Closed.IsZero() && s.Closed.Before(since) {
			continue
		}
		perPod[s.Pod] = append(perPod[s.Pod], s)
	}
	var out []Overlap
	pods := make([]string, 0, len(perPod))
	for pod := range perPod {
		pods = append(pods, pod)
	}
	slices.Sort(pods)
	for _, pod := range pods {
		out = append(out, overlapsOf(pod, perPod[pod], limit(pod), now)...)
	}
	return out
}

// overlapsOf sweeps one pod's sessions in time order: a close at the same
// instant as an open counts first, so back-to-back calls are no overlap.
func overlapsOf(pod string, sessions []Session, limit int, now time.Time) []Overlap {
	type event struct {
		at   time.Time
		open bool
		i    int
	}
	var evs []event
	for i, s := range sessions {
		end := s.Closed
		if end.IsZero() {
			end = now
		}
		evs = append(evs, event{s.Opened, true, i}, event{end, false, i})
	}
	slices.SortFunc(evs, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.open == b.open:
			return 0
		case !a.open:
			return -1
		}
		return 1
	})
	var out []Overlap
	open := map[int]bool{}
	var cur *Overlap
	seen := map[int]bool{}
	for _, e := range evs {
		if e.open {
			open[e.i] = true
		} else {
			delete(open, e.i)
		}
		switch {
		case len(open) > limit && cur == nil:
			cur = &Overlap{Pod: pod, From: e.at}
			clear(seen)
			fallthrough
		case len(open) > limit:
			cur.Most = max(cur.Most, len(open))
			for i := range open {
				seen[i] = true
			}
		case cur != nil:
			cur.To = e.at
			for i := range seen {
				id := sessions[i].CallID
				if id == "" {
					id = "(no start message)"
				}
				cur.Calls = append(cur.Calls, id)
			}
			slices.Sort(cur.Calls)
			out = append(out, *cur)
			cur = nil
		}
	}
	return out
}
