package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"html/template"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
)

// StatusPage is the read-only page at the admin listener's root: tiers
// and pools, pods with their state and calls, live calls with their
// timelines, drains, ejections, the leader and this replica's relay,
// rendered on the server from edge's own reads, with no script and no
// asset from anywhere (its Content-Security-Policy allows nothing else),
// refreshing itself.
type StatusPage struct {
	// Replica names this replica.
	Replica string
	// Relay returns the media relay proxy.relay asks for and the one new
	// sockets take; nil: not shown.
	Relay func() (configured, running string)
	// Refresh is how often the page reloads itself (0: 5s).
	Refresh time.Duration
}

// maxPageCalls bounds the live calls the page reads the timeline of: one
// Redis read each.
const maxPageCalls = 100

//go:embed statuspage.css
var pageCSS string

//go:embed statuspage.html
var pageHTML string

var pageTemplate = template.Must(template.New("status").Parse(pageHTML))

// pageCSP allows the page's one inline style sheet (by its hash) and
// nothing else: no script, image, font, frame, form target or connection.
var pageCSP = func() string {
	sum := sha256.Sum256([]byte(pageCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// guard lets a request through with the admin token as a bearer token (as
// the API takes it) or as the password of HTTP Basic credentials, the one
// a browser can send by itself (any user name), both compared in constant
// time, behind th like the API. A browser asked with a Basic challenge
// prompts for them; the token is never in a URL.
func (p *StatusPage) guard(th *AuthThrottle, token func() string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		want := token()
		if want == "" {
			next(w, r)
			return
		}
		res, retry := th.check(r, "admin", func() bool {
			return bearerMatches(r.Header.Get("Authorization"), want) || basicMatches(r, want)
		})
		switch res {
		case authThrottled:
			pageHeaders(w)
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(retry)))
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "too many failed sign-ins from this address: retry later\n")
		case authFailed:
			pageHeaders(w)
			w.Header().Set("WWW-Authenticate", `Basic realm="edge admin", charset="UTF-8"`)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, "unauthorized: sign in with any user name and the admin token as the password\n")
		default:
			next(w, r)
		}
	}
}

func basicMatches(r *http.Request, want string) bool {
	_, got, ok := r.BasicAuth()
	if !ok {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// serveStatusPage renders the page. A failed read (Redis down) is shown
// on the page with what could be read, under the status the API would
// answer for it.
func (s *Surface) serveStatusPage(w http.ResponseWriter, r *http.Request) {
	data, err := s.Page.read(r.Context(), s.Handlers)
	status := http.StatusOK
	if err != nil {
		f := calls.FailureOf(err)
		status, data.Error = f.Status, f.Message
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, data); err != nil {
		writeError(w, r, s.Handlers.Log, err)
		return
	}
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// pageData is what the template shows, every value already a string or
// number (the template escapes them).
type pageData struct {
	CSS                                template.CSS
	Replica, Leader, Relay, Now, Error string
	ThisLeads                          bool
	Refresh                            int
	Tiers                              []allocator.PoolStatus
	Pods                               []pagePod
	States                             []stateCount
	Calls                              []pageCall
	MoreCalls                          int
	Drains                             []pagePod
	Ejections                          []pageEjection
}

type stateCount struct {
	State string
	N     int
}

type pagePod struct {
	Name, Tier, State, Address string
	Calls                      []string
}

type pageCall struct {
	ID, State, Merchant, Creator, Pod, Source, MovedFrom string
	Allocated, Age, SocketOpened, SocketReplica          string
	// Resumed is how often the call moved mid-call and when it last did
	// (proxy.resume): "" for a call that never did, so that the column
	// stands out on the few that were.
	Resumed string
}

type pageEjection struct {
	Pod, Tier, Reason, Since, ProbeDue string
	Failures                           int
}

// read gathers the page's data: pools, pods (one pipeline per 256 pods),
// the leader, then each live call's timeline up to maxPageCalls. The
// first failed read ends it; what was read is kept.
func (p *StatusPage) read(ctx context.Context, h *Handlers) (pageData, error) {
	now := time.Now()
	d := pageData{CSS: template.CSS(pageCSS), Replica: p.Replica, Now: now.UTC().Format("2006-01-02 15:04:05 UTC"), Refresh: 5}
	if p.Refresh > 0 {
		d.Refresh = max(1, int(p.Refresh.Seconds()))
	}
	if h.IsLeader != nil {
		d.ThisLeads = h.IsLeader()
	}
	if p.Relay != nil {
		configured, running := p.Relay()
		d.Relay = running
		if configured != running {
			d.Relay += " (proxy.relay asks for " + configured + ")"
		}
	}
	leader, err := h.Pools.Leader(ctx)
	if err != nil {
		return d, err
	}
	d.Leader = leader
	if d.Tiers, err = h.Pools.Status(ctx); err != nil {
		return d, err
	}
	pods, err := h.Pools.Pods(ctx)
	if err != nil {
		return d, err
	}
	counts := map[string]int{}
	var live []string
	for _, pod := range pods {
		pp := pagePod{Name: pod.Name, Tier: pod.Tier, State: pod.State, Address: pod.Address, Calls: pod.LiveCalls()}
		d.Pods = append(d.Pods, pp)
		counts[pod.State]++
		live = append(live, pp.Calls...)
		if pod.Draining {
			d.Drains = append(d.Drains, pp)
		}
		if e := pod.Ejection; e != nil {
			d.Ejections = append(d.Ejections, pageEjection{Pod: pod.Name, Tier: pod.Tier, Reason: e.Reason,
				Since: clock(e.Since, now), ProbeDue: clock(e.ProbeDue, now), Failures: e.Failures})
		}
	}
	for _, st := range []string{allocator.StateAvailable, allocator.StateAllocated, allocator.StateDraining, allocator.StateEjected, allocator.StateUnready} {
		d.States = append(d.States, stateCount{st, counts[st]})
	}
	if h.Records == nil {
		return d, nil
	}
	slices.Sort(live)
	live = slices.Compact(live)
	if len(live) > maxPageCalls {
		d.MoreCalls = len(live) - maxPageCalls
		live = live[:maxPageCalls]
	}
	for _, id := range live {
		tl, err := h.Records.Timeline(ctx, id)
		if err != nil {
			// Ended between the two reads, or an id that is no call's.
			continue
		}
		c := pageCall{ID: id, State: tl.State, Merchant: tl.MerchantID, Creator: tl.Creator, Pod: tl.Pod,
			Source: tl.SourcePool, Allocated: clock(tl.AllocatedAt, now), SocketOpened: clock(tl.SocketOpenedAt, now),
			SocketReplica: tl.SocketReplica}
		for i, m := range tl.MovedFrom {
			if i > 0 {
				c.MovedFrom += ", "
			}
			c.MovedFrom += m
		}
		if tl.Resumptions > 0 {
			c.Resumed = strconv.Itoa(tl.Resumptions)
			if !tl.ResumedAt.IsZero() {
				c.Resumed += ", last " + clock(tl.ResumedAt, now)
			}
		}
		if !tl.AllocatedAt.IsZero() {
			c.Age = now.Sub(tl.AllocatedAt).Truncate(time.Second).String()
		}
		d.Calls = append(d.Calls, c)
	}
	return d, nil
}

// clock writes t as a UTC time of day to the millisecond with how long
// ago (or from now) it is; "" for the zero time.
func clock(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	s := t.UTC().Format("15:04:05.000")
	if d := now.Sub(t); d < 0 {
		return s + " (in " + (-d).Round(time.Second).String() + ")"
	}
	return s + " (" + now.Sub(t).Round(time.Second).String() + " ago)"
}
