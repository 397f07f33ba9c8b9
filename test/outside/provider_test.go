package outside

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/edge-voice/edge/internal/balancer"
	"github.com/edge-voice/edge/internal/edgetest"
)

// outsideProvider plays Twilio against edge, through the balancer as a
// real provider reaches a deployment: it posts signed voice webhooks,
// opens the media socket the TwiML names, streams frames carrying its own
// call's stream id, checks that every echo is its own, and hangs up. It
// records what each call saw; it never reads Redis.
type outsideProvider struct {
	base        string // http://<balancer>
	signedBase  string // what webhooks are signed for (providers.webhook_base_url)
	token       string // the Twilio auth token
	bal         *balancer.Balancer
	frameEvery  time.Duration
	prefix      string // makes call ids unique across rigs
	seq         atomic.Int64
	mu          sync.Mutex
	calls       []*outsideCall
	hookClient  *http.Client
	mediaDialer net.Dialer
}

// outsideCall is one call as the provider saw it.
type outsideCall struct {
	ID, Merchant string
	Sent         time.Time // webhook posted
	Answered     time.Time
	// Status is the webhook's HTTP status; 0 when no answer came (the
	// connection was refused or reset, or 15 s passed: Twilio's timeout).
	Status int
	Err    string
	// Answer: "stream" (<Connect><Stream>), "hangup" (<Say>/<Hangup>, the
	// caller hears a message and the number's fallback URL never runs) or
	// "other".
	Answer string
	Body   string
	Pod    string // named in the stream URL
	Params map[string]string

	// The media socket.
	Replica    string // the backend the balancer sent it to
	Opened     bool
	OpenedAt   time.Time
	DialStatus int // HTTP status of a refused upgrade (0: none or no answer)
	DialErr    string
	Ended      time.Time
	// Cut: the socket ended before the provider hung up; CloseCode is the
	// status of edge's close frame (-1: none, the connection just ended).
	Cut        bool
	CloseCode  websocket.StatusCode
	Frames     int // media frames sent
	Echoes     int // echoes of this call's frames
	Foreign    int // echoes naming another call's stream
	FirstAlien string
}

func newOutsideProvider(bal *balancer.Balancer, token string, frameEvery time.Duration) *outsideProvider {
	b := make([]byte, 8)
	rand.Read(b)
	return &outsideProvider{
		base:       "http://" + bal.Addr(),
		signedBase: outsideWebhookBase,
		token:      token,
		bal:        bal,
		frameEvery: frameEvery,
		prefix:     hex.EncodeToString(b),
		// One connection per webhook, as providers open them: a kept-alive
		// connection would stay on one replica whatever its readiness.
		hookClient: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

// Calls returns every call placed so far.
func (p *outsideProvider) Calls() []*outsideCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*outsideCall(nil), p.calls...)
}

// newCall mints a Twilio Call SID (CA + 32 hex digits).
func (p *outsideProvider) newCall(merchant string) *outsideCall {
	c := &outsideCall{ID: fmt.Sprintf("CA%s%016x", p.prefix, p.seq.Add(1)), Merchant: merchant, CloseCode: -1}
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	return c
}

// place runs one call: webhook, media socket, frames, and the provider's
// hang-up after d or when ctx ends, whichever comes first. The fields of
// c are written here only; read them after place returns.
func (p *outsideProvider) place(ctx context.Context, c *outsideCall, d time.Duration) {
	if !p.webhook(c) || c.Answer != "stream" {
		return
	}
	p.stream(ctx, c, d)
}

// twiml is the part of edge's answer the provider acts on.
type twiml struct {
	Connect *struct {
		Stream struct {
			URL    string `xml:"url,attr"`
			Params []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"Parameter"`
		} `xml:"Stream"`
	} `xml:"Connect"`
	Say    *string   `xml:"Say"`
	Hangup *struct{} `xml:"Hangup"`
}

// webhook posts the signed voice webhook and reads the answer; false when
// none came.
func (p *outsideProvider) webhook(c *outsideCall) bool {
	path := "/api/v1/twilio/allocate"
	if c.Merchant != "" {
		path += "?merchant_id=" + url.QueryEscape(c.Merchant)
	}
	form := url.Values{"CallSid": {c.ID}, "AccountSid": {"AC" + strings.Repeat("0", 32)}, "From": {"+15550100"}, "To": {"+15550199"}, "CallStatus": {"ringing"}}
	req, _ := http.NewRequest(http.MethodPost, p.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Twilio-Signature", edgetest.TwilioSign(p.token, p.signedBase+path, form))
	c.Sent = time.Now()
	resp, err := p.hookClient.Do(req)
	c.Answered = time.Now()
	if err != nil {
		c.Err = err.Error()
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	c.Status, c.Body = resp.StatusCode, string(body)
	var doc twiml
	switch {
	case xml.Unmarshal(body, &doc) != nil:
		c.Answer = "other"
	case doc.Connect != nil && doc.Connect.Stream.URL != "":
		c.Answer = "stream"
		u := doc.Connect.Stream.URL
		if pu, err := url.Parse(u); err == nil {
			if rest, ok := strings.CutPrefix(pu.Path, "/ws/pod/"); ok {
				c.Pod, _, _ = strings.Cut(rest, "/")
			}
		}
		c.Params = map[string]string{}
		for _, prm := range doc.Connect.Stream.Params {
			c.Params[prm.Name] = prm.Value
		}
		c.Body = u
	case doc.Hangup != nil || doc.Say != nil:
		c.Answer = "hangup"
	default:
		c.Answer = "other"
	}
	return true
}

// mediaFrame is a Twilio Media Streams message as the provider sends it.
func (c *outsideCall) frame(seq int, payload string) string {
	return fmt.Sprintf(`{"event":"media","sequenceNumber":"%d","media":{"track":"inbound","chunk":"%d","timestamp":"%d","payload":%q},"streamSid":%q}`,
		seq, seq, seq*20, payload, c.streamSID())
}

func (c *outsideCall) streamSID() string { return "MZ" + c.ID[2:] }

// stream opens the media socket (c.Body) and runs the call until d has
// passed or ctx ends.
func (p *outsideProvider) stream(ctx context.Context, c *outsideCall, d time.Duration) {
	var local atomic.Value // the socket's local address, the balancer's key
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := p.mediaDialer.DialContext(ctx, network, addr)
			if err == nil {
				local.Store(conn.LocalAddr().String())
			}
			return conn, err
		},
	}}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ws, resp, err := websocket.Dial(dctx, c.Body, &websocket.DialOptions{HTTPClient: client})
	cancel()
	if l, ok := local.Load().(string); ok && p.bal != nil {
		c.Replica, _ = p.bal.Route(l)
	}
	if err != nil {
		c.DialErr = err.Error()
		if resp != nil {
			c.DialStatus = resp.StatusCode
		}
		return
	}
	c.Opened, c.OpenedAt = true, time.Now()
	defer ws.CloseNow()

	// The reader checks every echo; it ends when the socket does. hungUp
	// says the provider started the close, so an end is not a cut.
	var hungUp atomic.Bool
	readDone := make(chan struct{})
	var echoes, foreign int
	var alien string
	var endErr error
	go func() {
		defer close(readDone)
		for {
			_, msg, err := ws.Read(context.Background())
			if err != nil {
				endErr = err
				return
			}
			var m struct {
				StreamSID string `json:"streamSid"`
			}
			if json.Unmarshal(msg, &m) != nil || m.StreamSID == "" {
				continue
			}
			if m.StreamSID != c.streamSID() {
				foreign++
				if alien == "" {
					alien = m.StreamSID
				}
				continue
			}
			echoes++
		}
	}()

	params, _ := json.Marshal(c.Params)
	msgs := []string{
		`{"event":"connected","protocol":"Call","version":"1.0.0"}`,
		fmt.Sprintf(`{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC%s","streamSid":%q,"callSid":%q,"tracks":["inbound"],"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1},"customParameters":%s},"streamSid":%q}`,
			strings.Repeat("0", 32), c.streamSID(), c.ID, params, c.streamSID()),
	}
	payload := base64.StdEncoding.EncodeToString(make([]byte, 160))
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go func() { // a cut stops the writer at once
		<-readDone
		wcancel()
	}()
	end := time.Now().Add(d)
	tick := time.NewTicker(p.frameEvery)
	defer tick.Stop()
	write := func(m string) bool { return ws.Write(wctx, websocket.MessageText, []byte(m)) == nil }
	ok := write(msgs[0]) && write(msgs[1])
	for seq := 2; ok && time.Now().Before(end); seq++ {
		select {
		case <-tick.C:
			ok = write(c.frame(seq, payload))
			if ok {
				c.Frames++
			}
		case <-wctx.Done():
			ok = false
		case <-ctx.Done():
			end = time.Now() // the provider hangs up now
		}
	}
	if ok {
		hungUp.Store(true)
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		closed := make(chan struct{})
		go func() {
			ws.Close(websocket.StatusNormalClosure, "call ended")
			close(closed)
		}()
		select {
		case <-closed:
		case <-cctx.Done():
		}
		ccancel()
	}
	<-readDone
	c.Ended = time.Now()
	c.Echoes, c.Foreign, c.FirstAlien = echoes, foreign, alien
	if !hungUp.Load() {
		c.Cut = true
		c.CloseCode = websocket.CloseStatus(endErr)
	}
}

// outsideLoad is calls started at a steady rate until stop.
type outsideLoad struct {
	p       *outsideProvider
	stopped chan struct{}
	wg      sync.WaitGroup
}

// startLoad starts rate calls per second of length d; merchant picks the
// merchant of the i-th call.
func (p *outsideProvider) startLoad(rate float64, d time.Duration, merchant func(i int) string) *outsideLoad {
	l := &outsideLoad{p: p, stopped: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			c := p.newCall(merchant(i))
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				p.place(context.Background(), c, d)
			}()
			select {
			case <-tick.C:
			case <-l.stopped:
				return
			}
		}
	}()
	return l
}

// stop starts no more calls and waits for the ones in flight to end.
func (l *outsideLoad) stop() {
	close(l.stopped)
	l.wg.Wait()
}
