// Package twilio is the Twilio provider: a form webhook verified with
// X-Twilio-Signature in, TwiML <Connect><Stream> out. edge runs it as a
// plugin process (`edge plugin twilio`); any program can serve it with
// plugins.Serve(twilio.New()).
package twilio

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/edge-voice/edge/plugins"
)

// Settings keys (providers.plugins.twilio.* in edge's config).
const (
	// SettingAuthTokens: comma-separated auth tokens of one account; any
	// one verifies (rotation). Empty, and no account's: no verification
	// (edge warns at start). Several accounts: plugins.AccountTokensPrefix
	// + the account's AccountSid ("auth_tokens.AC…") instead, see
	// parseSettings.
	SettingAuthTokens = plugins.SettingAuthTokens
	// SettingFailureMode is how refusals about the call (no capacity, a bad
	// request) are answered: "say" (default) with HTTP 200 <Say> +
	// <Hangup/>; "fallback" with their HTTP status (503 for no capacity),
	// so that the number's fallback URL takes those calls too. edge's own
	// failures follow providers.unavailable_answer, not this setting.
	SettingFailureMode = "failure_mode"
	// SettingSayMessage is what <Say> speaks on a failure.
	SettingSayMessage = "say_message"
	// SettingEndedMessage is what <Say> speaks to a webhook of a call that
	// has ended (a late or replayed one).
	SettingEndedMessage = "ended_message"
)

// Default words.
const (
	// DefaultSayMessage is spoken when no pod can take the call.
	DefaultSayMessage = "Sorry, no agent is available right now. Please try again later."
	// DefaultEndedMessage is spoken to a webhook of an ended call: telling
	// it that no agent is available would be false while pods are free.
	DefaultEndedMessage = "This call has ended."
)

type settings struct {
	creds    []plugins.Credential
	accounts bool // creds name accounts (their AccountSids)
	fallback bool
	say      string
	ended    string
}

// Provider is the Twilio provider. The zero value is not ready: use New.
// Configure and ValidateSettings share parseSettings.
type Provider struct {
	*plugins.Parsed[settings]
}

// New returns a Twilio provider with default settings (no verification).
func New() *Provider {
	return &Provider{plugins.NewParsed(&settings{say: DefaultSayMessage, ended: DefaultEndedMessage}, parseSettings)}
}

// Describe implements plugins.Provider.
func (p *Provider) Describe(context.Context) (plugins.Description, error) {
	// A Media Stream opens with "connected" and then "start", which names
	// the call and the stream (Twilio's "Media Streams - WebSocket
	// Messages"); neither depends on the socket it came on.
	return plugins.Description{Name: "twilio", Routes: []plugins.Route{{Method: http.MethodPost, Path: RouteStatus}}, RendersFallback: true,
		ResumeReplay: []string{"connected", "start"},
		// After a move, "clear" empties the audio the dead pod queued
		// (and makes Twilio echo every mark still pending); a mark's echo
		// names what the pod that sent it asked for, so it belongs to that
		// pod's leg (Twilio's "Media Streams - WebSocket Messages": clear,
		// mark).
		ResumeNotice: []string{`{"event":"clear","streamSid":"{{start.streamSid}}"}`},
		LegEvents:    []plugins.LegEvent{{Sent: "mark", Name: "mark.name"}},
		// Twilio signs a Media Stream's upgrade as it signs a webhook
		// (its firewall guide asks stream servers to check it): the
		// agent behind edge may check it again.
		MediaHeaders: []string{"X-Twilio-Signature"}}, nil
}

// parseSettings refuses credentials plugins.Credentials refuses, and an
// account not named by its AccountSid: a webhook must name the account
// whose token signed it (its AccountSid parameter, which Twilio signs), so
// that a token filed under the wrong account is found on the first call,
// and a token cannot sign for calls of an account it does not belong to.
// An unknown failure_mode is a warning.
func parseSettings(s plugins.Settings) (*settings, plugins.Configured, error) {
	creds, err := plugins.Credentials(s)
	if err != nil {
		return nil, plugins.Configured{}, err
	}
	next := &settings{creds: creds, say: s[SettingSayMessage], ended: s[SettingEndedMessage]}
	for _, c := range creds {
		if c.Account == "" {
			continue
		}
		next.accounts = true
		if !ValidAccountSid(c.Account) {
			return nil, plugins.Configured{}, &plugins.InvalidSetting{Key: plugins.AccountTokensPrefix + c.Account,
				Reason: "a Twilio account is named by its AccountSid (AC + 32 hex digits)"}
		}
	}
	if next.say == "" {
		next.say = DefaultSayMessage
	}
	if next.ended == "" {
		next.ended = DefaultEndedMessage
	}
	var warnings []string
	switch s[SettingFailureMode] {
	case "", "say":
	case "fallback":
		next.fallback = true
	default:
		warnings = append(warnings, `failure_mode must be "say" or "fallback"; using "say"`)
	}
	return next, plugins.Configured{Verifies: len(next.creds) > 0, Warnings: warnings}, nil
}

// Webhook implements plugins.Provider: verify, then parse.
func (p *Provider) Webhook(_ context.Context, req *plugins.Request) (*plugins.WebhookResult, error) {
	s := p.Current()
	// A voice URL may be configured with method GET: the parameters then
	// come in the query, and the signature covers the URL alone (nothing
	// is appended to it).
	var form, signed url.Values
	switch req.Method {
	case http.MethodPost:
		var err error
		if form, err = plugins.ParseForm(req.Body); err != nil {
			return plugins.RejectBadRequest(err.Error()), nil
		}
		signed = form
	case http.MethodGet:
		form = req.Query()
	default:
		return plugins.Reject(http.StatusMethodNotAllowed, "method_not_allowed", "Twilio webhooks are POST or GET"), nil
	}
	var account string
	if len(s.creds) > 0 {
		var ok bool
		if account, ok = VerifyAccount(s.creds, req.URL, signed, req.Header.Get(SignatureHeader)); !ok {
			return plugins.RejectForbidden("missing or invalid " + SignatureHeader), nil
		}
	}
	// The account whose token signed is the one the webhook must name:
	// Twilio sends AccountSid with every voice webhook and status
	// callback, inside what it signs.
	if s.accounts && !strings.EqualFold(form.Get("AccountSid"), account) {
		return plugins.RejectForbidden("AccountSid is not the account whose token signed the request"), nil
	}
	if req.Route == RouteStatus {
		res := statusCallback(form)
		res.Account = account
		return res, nil
	}
	callID := form.Get("CallSid")
	if callID == "" {
		return plugins.RejectBadRequest("CallSid is missing"), nil
	}
	if !ValidCallSid(callID) {
		return plugins.RejectBadRequest("CallSid is not a Twilio Call SID (CA + 32 hex digits)"), nil
	}
	ar := plugins.CallQuery(req.Query(), callID)
	ar.Extras = map[string]string{"from": form.Get("From"), "to": form.Get("To"), "account_sid": form.Get("AccountSid")}
	tmpl, err := plugins.NewTemplate(plugins.EscapeXML, func(a plugins.Allocation) (*plugins.Response, error) {
		return connectAnswer(*ar, a, req.CallbackBase)
	})
	if err != nil {
		return nil, err
	}
	return &plugins.WebhookResult{Allocate: ar, Template: tmpl, Account: account}, nil
}

// Answer implements plugins.Provider.
func (p *Provider) Answer(_ context.Context, req *plugins.AnswerRequest) (*plugins.Response, error) {
	if req.Allocation != nil {
		return connectAnswer(req.Request, *req.Allocation, req.CallbackBase)
	}
	f := req.Failure
	if f == nil {
		f = &plugins.Failure{}
	}
	if f.Fallback {
		// Twilio requests the number's fallback URL when the voice URL
		// answers an HTTP error or times out (its error 11200).
		return plugins.FallbackAnswer(f), nil
	}
	s := p.Current()
	status, msg := plugins.SpokenRefusal(f, s.fallback, s.say, s.ended)
	return sayHangupAnswer(status, msg)
}
