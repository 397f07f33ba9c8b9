package nodee2e

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} }

// event is what an agent reported (test/node-e2e/agent's Event).
type event struct {
	Pod  string    `json:"pod"`
	IP   string    `json:"ip"`
	Kind string    `json:"kind"`
	Call string    `json:"call"`
	Path string    `json:"path"`
	Code int       `json:"code"`
	At   time.Time `json:"at"`
	Note string    `json:"note"`
}

// recorder collects the agents' events on the node's address.
type recorder struct {
	mu     sync.Mutex
	events []event
	srv    *http.Server
}

func startRecorder(t *testing.T) *recorder {
	ln, err := net.Listen("tcp", nodeIP+":"+recorderPort)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var e event
		if err := json.NewDecoder(req.Body).Decode(&e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
	}), ReadHeaderTimeout: 5 * time.Second}
	go r.srv.Serve(ln)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

// since returns the events at or after t0, in arrival order.
func (r *recorder) since(t0 time.Time) []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event
	for _, e := range r.events {
		if !e.At.Before(t0) {
			out = append(out, e)
		}
	}
	return out
}

// instance names one run of an agent pod: a StatefulSet's replacement
// has the same name and another address.
type instance struct{ Pod, IP string }

func (e event) instance() instance { return instance{e.Pod, e.IP} }

// call is one call as the provider placed and saw it.
type call struct {
	Sid       string
	Pod       string    // the pod its media URL names
	Webhook   time.Time // when edge answered the webhook
	Status    int       // the webhook's status (0: no answer)
	Err       string    // what went wrong, "" when the call ended as the provider ended it
	Cut       bool      // the media socket ended before the provider hung up
	CloseCode int       // the close status edge sent when it ended the socket (-1: none)
	Start     time.Time
	End       time.Time
	Echoes    int
}

// provider places calls as Twilio does: a signed voice webhook to the
// edge Service, then the media socket its TwiML names, through the same
// Service; every message the agent echoes is checked.
type provider struct {
	public string // http://<edge Service>:80
	base   string // the URL edge is told it is reached at (webhook_base_url)
	token  string // the Twilio auth token
	seq    atomic.Int64
	client *http.Client
}

// webhookPath is the Twilio voice webhook's route for calls of merchant:
// Twilio is configured with one URL per merchant, the merchant in its
// query, which the signature covers.
func webhookPath(merchant string) string {
	return "/api/v1/twilio/allocate?merchant_id=" + url.QueryEscape(merchant)
}

// defaultMerchant places every call but a moved one's (keptMerchant): not
// opted in to proxy.resume, its calls end with their pod.
const defaultMerchant = "demo"

var twimlStream = regexp.MustCompile(`<Stream url="([^"]+)"`)

func newProvider(public, token string) *provider {
	return &provider{public: public, base: "https://edge.example.com", token: token,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

func (p *provider) sid() string {
	return fmt.Sprintf("CA%032x", uint64(time.Now().UnixNano())<<8|uint64(p.seq.Add(1)&0xff))
}

// webhook posts a signed voice webhook for a call of merchant and returns
// the status and the media URL's path.
func (p *provider) webhook(sid, merchant string) (int, string, error) {
	form := url.Values{"CallSid": {sid}, "From": {"+15550100"}, "To": {"+15550199"}}
	names := make([]string, 0, len(form))
	for n := range form {
		names = append(names, n)
	}
	sort.Strings(names)
	signed := p.base + webhookPath(merchant)
	for _, n := range names {
		signed += n + form.Get(n)
	}
	mac := hmac.New(sha1.New, []byte(p.token))
	mac.Write([]byte(signed))
	req, _ := http.NewRequest(http.MethodPost, p.public+webhookPath(merchant), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := twimlStream.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		return resp.StatusCode, "", fmt.Errorf("webhook: %d %s", resp.StatusCode, body)
	}
	u, err := url.Parse(html.UnescapeString(string(m[1])))
	if err != nil {
		return resp.StatusCode, "", err
	}
	return resp.StatusCode, u.RequestURI(), nil
}

// place makes one call of length d: the webhook, the media socket, a
// media message every 20 ms checked against its echo, then the provider
// hangs up (close 1000). A socket edge ends first is a cut call.
func (p *provider) place(ctx context.Context, d time.Duration) call {
	c := call{Sid: p.sid(), CloseCode: -1}
	status, path, err := p.webhook(c.Sid, defaultMerchant)
	c.Webhook, c.Status = time.Now(), status
	if err != nil {
		c.Err = err.Error()
		return c
	}
	if rest, ok := strings.CutPrefix(path, "/ws/pod/"); ok {
		c.Pod, _, _ = strings.Cut(rest, "/")
	}
	// A call answered is on the line: stopping the load does not abandon
	// its media socket.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	conn, _, err := websocket.Dial(dctx, "ws://"+strings.TrimPrefix(p.public, "http://")+path, nil)
	cancel()
	if err != nil {
		c.Err = "media socket: " + err.Error()
		return c
	}
	defer conn.CloseNow()
	c.Start = time.Now()
	rctx, rcancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer rcancel()
	send := func(msg string) bool {
		if err := conn.Write(rctx, websocket.MessageText, []byte(msg)); err != nil {
			c.Cut, c.Err = true, "write: "+err.Error()
			return false
		}
		_, got, err := conn.Read(rctx)
		if err != nil {
			c.Cut, c.Err, c.CloseCode = true, "read: "+err.Error(), int(websocket.CloseStatus(err))
			return false
		}
		if string(got) != msg {
			c.Err = fmt.Sprintf("echo %q, want %q", got, msg)
			return false
		}
		c.Echoes++
		return true
	}
	if !send(fmt.Sprintf(`{"event":"start","start":{"callSid":%q}}`, c.Sid)) {
		c.End = time.Now()
		return c
	}
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		if !send(fmt.Sprintf(`{"event":"media","sequenceNumber":"%d","media":{"payload":"AAAA"}}`, i)) {
			c.End = time.Now()
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn.Close(websocket.StatusNormalClosure, "caller hung up")
	c.End = time.Now()
	return c
}

// load keeps n calls of length d on the line until stop is called, and
// returns every call placed.
type load struct {
	mu    sync.Mutex
	calls []call
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func (p *provider) load(n int, d time.Duration) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel}
	for i := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			// Staggered, so that calls end and begin all along.
			select {
			case <-time.After(time.Duration(i) * d / time.Duration(n)):
			case <-ctx.Done():
				return
			}
			for ctx.Err() == nil {
				c := p.place(ctx, d)
				l.mu.Lock()
				l.calls = append(l.calls, c)
				l.mu.Unlock()
				if c.Err != "" {
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	return l
}

// finish stops placing calls, lets those on the line end and returns all.
func (l *load) finish() []call {
	l.stop()
	l.wg.Wait()
	return l.calls
}

// summary counts calls by outcome for a test log line.
func summary(calls []call) string {
	ok, refused, cut, other := 0, 0, 0, 0
	for _, c := range calls {
		switch {
		case c.Err == "":
			ok++
		case c.Status != http.StatusOK:
			refused++
		case c.Cut:
			cut++
		default:
			other++
		}
	}
	return fmt.Sprintf("%d calls: %d ended by the caller, %d webhooks refused, %d cut, %d failed otherwise", len(calls), ok, refused, cut, other)
}

// admin reads edge's admin API through the edge-admin Service.
type admin struct {
	base, token string
}

func (a admin) get(path string, v any) error {
	req, _ := http.NewRequest(http.MethodGet, a.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// metric reads one sample of /metrics at base (0, false when absent).
func (a admin) metric(base, series string) (float64, bool) {
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f, true
		}
	}
	return 0, false
}

// metricLines returns the lines of /metrics at base starting with prefix.
func (a admin) metricLines(base, prefix string) []string {
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// pooled is the number of pods edge has in its pools (assigned to a tier).
func (a admin) pooled() int {
	var st struct {
		Tiers map[string]struct {
			Assigned int `json:"assigned"`
		} `json:"tiers"`
	}
	if a.get("/api/v1/status", &st) != nil {
		return -1
	}
	n := 0
	for _, p := range st.Tiers {
		n += p.Assigned
	}
	return n
}
