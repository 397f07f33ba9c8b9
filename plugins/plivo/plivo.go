// Package plivo is the Plivo provider: a form webhook verified with
// X-Plivo-Signature-V3 in, Plivo XML <Stream> out. edge runs it as a plugin
// process (`edge plugin plivo`).
package plivo

import (
	"context"
	"encoding/xml"
	"net/http"
	"net/url"

	"github.com/edge-voice/edge/plugins"
)

// Settings keys (providers.plugins.plivo.* in edge's config).
const (
	// SettingAuthTokens: comma-separated auth tokens of one account
	// (rotation). Empty, and no account's: no verification (edge warns at
	// start). Several accounts: plugins.AccountTokensPrefix + a label (the
	// account's auth id, say) instead.
	SettingAuthTokens = plugins.SettingAuthTokens
	// SettingContentType is the <Stream contentType>; default
	// "audio/x-mulaw;rate=8000".
	SettingContentType = "content_type"
	// SettingFailureMode is how refusals about the call (no capacity, a bad
	// request) are answered: "speak" (default: HTTP 200 <Speak> +
	// <Hangup/>) or "fallback" (their HTTP status, 503 for no capacity, so
	// that the application's fallback_answer_url takes those calls too).
	// edge's own failures follow providers.unavailable_answer instead.
	SettingFailureMode = "failure_mode"
	// SettingSpeakMessage is what <Speak> says on a failure.
	SettingSpeakMessage = "speak_message"
	// SettingEndedMessage is what <Speak> says to a webhook of a call that
	// has ended (a late or replayed one).
	SettingEndedMessage = "ended_message"
)

// Defaults.
const (
	DefaultContentType  = "audio/x-mulaw;rate=8000"
	DefaultSpeakMessage = "Sorry, no agent is available right now. Please try again later."
	// DefaultEndedMessage is said to a webhook of an ended call: telling
	// it that no agent is available would be false while pods are free.
	DefaultEndedMessage = "This call has ended."
)

type settings struct {
	creds       []plugins.Credential
	contentType string
	fallback    bool
	speak       string
	ended       string
}

// Provider is the Plivo provider; use New. It keeps no state of its own
// but its settings: replays are refused by edge, which remembers the
// nonces this plugin reports in Redis for every replica (a V3 signature
// has no expiry, and Plivo sends a fresh nonce with every request).
type Provider struct {
	*plugins.Parsed[settings] // Configure and ValidateSettings share parseSettings
}

// New returns a Plivo provider with default settings (no verification).
func New() *Provider {
	return &Provider{
		Parsed: plugins.NewParsed(&settings{contentType: DefaultContentType, speak: DefaultSpeakMessage, ended: DefaultEndedMessage}, parseSettings),
	}
}

// Describe implements plugins.Provider.
func (p *Provider) Describe(context.Context) (plugins.Description, error) {
	return plugins.Description{Name: "plivo", Routes: []plugins.Route{{Method: http.MethodPost, Path: RouteHangup},
		{Method: http.MethodPost, Path: RouteStatus}}, RendersFallback: true,
		// An audio stream opens with "start" alone, sent once when the
		// socket opens, naming the call and the stream (Plivo's audio
		// streaming reference).
		ResumeReplay: []string{"start"},
		// "clearAudio" drops the audio queued on the stream; a
		// "checkpoint" the pod sends is answered with "playedStream" of
		// the same name once the audio before it played (the same
		// reference).
		ResumeNotice: []string{`{"event":"clearAudio","streamId":"{{start.start.streamId}}"}`},
		LegEvents:    []plugins.LegEvent{{Sent: "checkpoint", Echo: "playedStream", Name: "name"}}}, nil
}

// parseSettings refuses only credentials plugins.Credentials refuses: an
// unknown failure_mode is a warning.
func parseSettings(s plugins.Settings) (*settings, plugins.Configured, error) {
	creds, err := plugins.Credentials(s)
	if err != nil {
		return nil, plugins.Configured{}, err
	}
	next := &settings{
		creds: creds, contentType: s[SettingContentType], speak: s[SettingSpeakMessage],
		ended: s[SettingEndedMessage],
	}
	if next.contentType == "" {
		next.contentType = DefaultContentType
	}
	if next.speak == "" {
		next.speak = DefaultSpeakMessage
	}
	if next.ended == "" {
		next.ended = DefaultEndedMessage
	}
	var warnings []string
	switch s[SettingFailureMode] {
	case "", "speak":
	case "fallback":
		next.fallback = true
	default:
		warnings = append(warnings, `failure_mode must be "speak" or "fallback"; using "speak"`)
	}
	return next, plugins.Configured{Verifies: len(next.creds) > 0, Warnings: warnings}, nil
}

// Webhook implements plugins.Provider.
func (p *Provider) Webhook(_ context.Context, req *plugins.Request) (*plugins.WebhookResult, error) {
	s := p.Current()
	form, rej := params(req)
	if rej != nil {
		return rej, nil
	}
	var nonce, account string
	if len(s.creds) > 0 {
		n := req.Header.Get(NonceHeader)
		var ok bool
		if account, ok = VerifyAccount(s.creds, req.Method, req.URL, form, n, req.Header.Get(SignatureHeader)); !ok {
			return plugins.RejectForbidden("missing or invalid " + SignatureHeader), nil
		}
		// Only a verified nonce is reported: a forger cannot spend one.
		nonce = n
	}
	if req.Route == RouteHangup || req.Route == RouteStatus {
		res := statusCallback(req.Route, form, nonce)
		res.Account = account
		return res, nil
	}
	callID := form.Get("CallUUID")
	if callID == "" {
		return rejectWithNonce(plugins.RejectBadRequest("CallUUID is missing"), nonce), nil
	}
	if !ValidCallUUID(callID) {
		return rejectWithNonce(plugins.RejectBadRequest("CallUUID is not a UUID"), nonce), nil
	}
	ar := plugins.CallQuery(req.Query(), callID)
	ar.Extras = map[string]string{"from": form.Get("From"), "to": form.Get("To")}
	tmpl, err := plugins.NewTemplate(plugins.EscapeXML, func(a plugins.Allocation) (*plugins.Response, error) {
		return streamAnswer(s, a, req.CallbackBase)
	})
	if err != nil {
		return nil, err
	}
	return &plugins.WebhookResult{Allocate: ar, Template: tmpl, Nonce: nonce, Account: account}, nil
}

// rejectWithNonce spends the nonce of a signed request refused for its
// content, so that a replay of it is refused before it is read again.
func rejectWithNonce(res *plugins.WebhookResult, nonce string) *plugins.WebhookResult {
	res.Nonce = nonce
	return res
}

// params are the webhook's parameters: the form body of a POST, or the
// query of a GET (the answer_method of a Plivo application may be GET; its
// signature then covers the URL alone).
func params(req *plugins.Request) (url.Values, *plugins.WebhookResult) {
	switch req.Method {
	case http.MethodPost:
		form, err := plugins.ParseForm(req.Body)
		if err != nil {
			return nil, plugins.RejectBadRequest(err.Error())
		}
		return form, nil
	case http.MethodGet:
		return req.Query(), nil
	}
	return nil, plugins.Reject(http.StatusMethodNotAllowed, "method_not_allowed", "Plivo webhooks are POST or GET")
}

// Answer implements plugins.Provider.
func (p *Provider) Answer(_ context.Context, req *plugins.AnswerRequest) (*plugins.Response, error) {
	s := p.Current()
	if req.Allocation != nil {
		return streamAnswer(s, *req.Allocation, req.CallbackBase)
	}
	f := req.Failure
	if f == nil {
		f = &plugins.Failure{}
	}
	if f.Fallback {
		// Plivo requests the application's fallback_answer_url when the
		// answer_url is unavailable (an HTTP error, a timeout) or its XML
		// is invalid.
		return plugins.FallbackAnswer(f), nil
	}
	status, msg := plugins.SpokenRefusal(f, s.fallback, s.speak, s.ended)
	resp, err := plugins.XMLAnswer(status, plivoSpeakHangup{Speak: msg, Hangup: &struct{}{}})
	if err == nil {
		resp.ContentType = "text/xml"
	}
	return resp, err
}

type plivoStream struct {
	XMLName xml.Name `xml:"Response"`
	Stream  struct {
		Bidirectional bool   `xml:"bidirectional,attr"`
		KeepCallAlive bool   `xml:"keepCallAlive,attr"`
		ContentType   string `xml:"contentType,attr"`
		// StatusCallbackURL gets the stream's events; omitted without a
		// webhook base.
		StatusCallbackURL    string `xml:"statusCallbackUrl,attr,omitempty"`
		StatusCallbackMethod string `xml:"statusCallbackMethod,attr,omitempty"`
		URL                  string `xml:",chardata"`
	} `xml:"Stream"`
}

type plivoSpeakHangup struct {
	XMLName xml.Name  `xml:"Response"`
	Speak   string    `xml:"Speak"`
	Hangup  *struct{} `xml:"Hangup"`
}

// streamAnswer is <Response><Stream ...>wss://...</Stream></Response>: the
// URL is the element's text. With a callback base the stream's events go
// to its status route, so that a stream that drops before it opens ends
// the call at once.
func streamAnswer(s *settings, a plugins.Allocation, callbackBase string) (*plugins.Response, error) {
	var doc plivoStream
	doc.Stream.Bidirectional, doc.Stream.KeepCallAlive = true, true
	doc.Stream.ContentType, doc.Stream.URL = s.contentType, a.WSURL
	if callbackBase != "" {
		doc.Stream.StatusCallbackURL, doc.Stream.StatusCallbackMethod = callbackBase+"/"+RouteStatus, http.MethodPost
	}
	resp, err := plugins.XMLAnswer(http.StatusOK, doc)
	if err == nil {
		resp.ContentType = "text/xml"
	}
	return resp, err
}
