// Package exotel is the Exotel provider: a JSON webhook on the
// predecessor's route and the Voicebot applet's dynamic-URL lookup (a GET
// with the call's details in the query), both answered {"url": "wss://..."}.
// Exotel does not sign requests: they are authenticated with HTTP Basic
// credentials and/or a source IP allow-list. edge runs it as a plugin
// process (`edge plugin exotel`).
package exotel

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/edge-voice/edge/plugins"
)

// Settings keys (providers.plugins.exotel.* in edge's config).
const (
	// SettingAuthTokens: comma-separated "user:password" pairs accepted as
	// HTTP Basic credentials of one account (rotation). Several accounts:
	// plugins.AccountTokensPrefix + a label (the Exotel account's SID, say)
	// instead, each with its own pairs.
	SettingAuthTokens = plugins.SettingAuthTokens
	// SettingAllowIPs: comma-separated IPs or CIDRs the webhooks may come
	// from. With credentials too, both must match.
	SettingAllowIPs = "allow_ips"
)

// RouteVoicebot is the Voicebot applet's dynamic URL:
// GET /providers/exotel/voicebot?CallSid=...&merchant_id=...
const RouteVoicebot = "voicebot"

type settings struct {
	creds []plugins.Credential
	allow *allowList
	rates rates
}

// Provider is the Exotel provider; use New. Its Configure and
// ValidateSettings (the dry run edge asks for before a reload) share
// parseSettings.
type Provider struct {
	*plugins.Parsed[settings]
}

// New returns an Exotel provider with no authentication configured.
func New() *Provider {
	return &Provider{plugins.NewParsed(&settings{allow: &allowList{}}, parseSettings)}
}

// Describe implements plugins.Provider.
func (p *Provider) Describe(context.Context) (plugins.Description, error) {
	// Exotel's Voicebot applet retries a failed WebSocket handshake once
	// (Exotel's "Working with the Stream and Voicebot Applet" guide,
	// "Connection Retry").
	return plugins.Description{Name: "exotel", Routes: []plugins.Route{{Method: http.MethodGet, Path: RouteVoicebot},
		{Method: http.MethodPost, Path: RouteStatus}},
		RendersFallback: true, MediaHandshakeRetries: 1, MediaParams: mediaParams,
		// The stream opens with "connected", then "start" naming the call,
		// the stream and its media format (Exotel's AgentStream WebSocket
		// protocol).
		ResumeReplay: []string{"connected", "start"},
		// A Voicebot stream takes "clear" (the audio queued so far is
		// dropped) and echoes each "mark" once the audio before it
		// played, as Twilio's does (the same protocol reference).
		ResumeNotice: []string{`{"event":"clear","stream_sid":"{{start.stream_sid}}"}`},
		LegEvents:    []plugins.LegEvent{{Sent: "mark", Name: "mark.name"}}}, nil
}

func parseSettings(s plugins.Settings) (*settings, plugins.Configured, error) {
	allow, err := parseAllowList(s[SettingAllowIPs])
	if err != nil {
		return nil, plugins.Configured{}, err
	}
	r, err := parseRates(s)
	if err != nil {
		return nil, plugins.Configured{}, err
	}
	creds, err := plugins.Credentials(s)
	if err != nil {
		return nil, plugins.Configured{}, err
	}
	next := &settings{creds: creds, allow: allow, rates: r}
	return next, plugins.Configured{Verifies: len(next.creds) > 0 || !allow.empty()}, nil
}

// webhookBody is the predecessor's JSON body; only CallSid is required.
type webhookBody struct {
	CallSid  string `json:"CallSid"`
	CallFrom string `json:"CallFrom"`
	CallTo   string `json:"CallTo"`
	From     string `json:"From"`
	To       string `json:"To"`
}

// Webhook implements plugins.Provider.
func (p *Provider) Webhook(_ context.Context, req *plugins.Request) (*plugins.WebhookResult, error) {
	s := p.Current()
	account, rej := s.authenticate(req)
	if rej != nil {
		return rej, nil
	}
	if req.Route == RouteStatus {
		res := statusCallback(req)
		res.Account = account
		return res, nil
	}
	var body webhookBody
	switch req.Route {
	case RouteVoicebot:
		q := req.Query()
		body = webhookBody{CallSid: q.Get("CallSid"), CallFrom: q.Get("CallFrom"), CallTo: q.Get("CallTo"), From: q.Get("From"), To: q.Get("To")}
	default:
		if req.Method != http.MethodPost {
			return plugins.Reject(http.StatusMethodNotAllowed, "method_not_allowed", "use POST"), nil
		}
		if err := ParseBody(req.Body, &body); err != nil {
			return plugins.RejectBadRequest(err.Error()), nil
		}
	}
	if body.CallSid == "" {
		return plugins.RejectBadRequest("CallSid is missing"), nil
	}
	ar := plugins.CallQuery(req.Query(), body.CallSid)
	ar.Extras = map[string]string{"from": first(body.CallFrom, body.From), "to": first(body.CallTo, body.To)}
	ar.MediaParams = s.rates.params(ar.MerchantID)
	tmpl, err := plugins.NewTemplate(plugins.EscapeJSON, urlAnswer)
	if err != nil {
		return nil, err
	}
	return &plugins.WebhookResult{Allocate: ar, Template: tmpl, Account: account}, nil
}

// Answer implements plugins.Provider: {"url": ...}, or a JSON failure with
// its status (503 for no capacity) so that the applet's failure branch runs.
// The applet has no 2xx failure form (a 2xx must name a URL), so edge's own
// failures answer alike whether or not Failure.Fallback is set: a non-2xx
// that fails the applet, after which the flow goes on as it is built.
func (p *Provider) Answer(_ context.Context, req *plugins.AnswerRequest) (*plugins.Response, error) {
	if req.Allocation != nil {
		return urlAnswer(*req.Allocation)
	}
	f := req.Failure
	if f == nil {
		f = &plugins.Failure{Message: "internal error"}
	}
	if f.Fallback {
		return plugins.FallbackAnswer(f), nil
	}
	status := f.Status
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	code := f.Kind.String()
	if f.Reason != "" {
		code = f.Reason
	}
	return plugins.JSONAnswer(status, map[string]any{"success": false, "error": f.Message, "code": code})
}

func urlAnswer(a plugins.Allocation) (*plugins.Response, error) {
	return plugins.JSONAnswer(http.StatusOK, struct {
		URL string `json:"url"`
	}{a.WSURL})
}

// ParseBody decodes the webhook's JSON body: exactly one object, unknown
// fields allowed (Exotel sends more than edge reads).
func ParseBody(body []byte, v *webhookBody) error {
	if err := json.Unmarshal(body, v); err != nil {
		return plugins.ErrMalformed
	}
	return nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
