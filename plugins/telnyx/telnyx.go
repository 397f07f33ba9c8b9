// Package telnyx is the Telnyx provider: a TeXML application's voice
// webhook, verified with Telnyx's Ed25519 signature, in; TeXML
// <Connect><Stream> out. edge runs it as a plugin process (`edge plugin
// telnyx`).
//
// Unlike Twilio's and Plivo's HMACs over a rebuilt URL and sorted
// parameters, Telnyx signs the timestamp and the raw body with a private
// key edge never holds: the plugin verifies with the account's public
// key(s), checks the timestamp's age, and reports the signature as the
// request's nonce so that edge refuses a replay within that age.
package telnyx

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"github.com/edge-voice/edge/plugins"
)

// Settings keys (providers.plugins.telnyx.* in edge's config).
const (
	// SettingAuthTokens: comma-separated base64 Ed25519 public keys
	// (Telnyx's portal, Keys & Credentials, Public Key); any one verifies
	// (rotation). A value that is not a key is refused. Empty: no
	// verification (edge warns at start).
	SettingAuthTokens = "auth_tokens"
	// SettingFailureMode is how refusals about the call (no capacity, a
	// bad request) are answered: "say" (default: HTTP 200 <Say> +
	// <Hangup/>) or "fallback" (their HTTP status, so that the TeXML
	// application's failover URL takes those calls too). edge's own
	// failures follow providers.unavailable_answer.
	SettingFailureMode = "failure_mode"
	// SettingSayMessage is what <Say> speaks on a failure.
	SettingSayMessage = "say_message"
	// SettingEndedMessage is what <Say> speaks to a webhook of a call that
	// has ended (a late or replayed one).
	SettingEndedMessage = "ended_message"
	// SettingTrack is <Stream track>: inbound_track (default),
	// outbound_track or both_tracks.
	SettingTrack = "track"
	// SettingBidirectionalMode is <Stream bidirectionalMode>: rtp
	// (default: the agent answers with media frames of the call's codec)
	// or mp3.
	SettingBidirectionalMode = "bidirectional_mode"
)

// Defaults.
const (
	DefaultSayMessage        = "Sorry, no agent is available right now. Please try again later."
	DefaultEndedMessage      = "This call has ended."
	DefaultTrack             = "inbound_track"
	DefaultBidirectionalMode = "rtp"
)

type settings struct {
	keys          PublicKeys
	fallback      bool
	say, ended    string
	track         string
	bidirectional string
}

// Provider is the Telnyx provider; use New. Configure and
// ValidateSettings share parseSettings.
type Provider struct {
	*plugins.Parsed[settings]
	now func() time.Time
}

// New returns a Telnyx provider with default settings (no verification).
func New() *Provider {
	return &Provider{
		Parsed: plugins.NewParsed(&settings{say: DefaultSayMessage, ended: DefaultEndedMessage, track: DefaultTrack,
			bidirectional: DefaultBidirectionalMode}, parseSettings),
		now: time.Now,
	}
}

// Describe implements plugins.Provider.
func (p *Provider) Describe(context.Context) (plugins.Description, error) {
	// A media stream opens with "connected", then "start" naming the call
	// and the stream's media format (Telnyx's media streaming reference).
	return plugins.Description{Name: "telnyx", Routes: []plugins.Route{{Method: http.MethodPost, Path: RouteStatus}}, RendersFallback: true,
		ResumeReplay: []string{"connected", "start"},
		// A bidirectional stream takes "clear" (no stream named: the
		// socket's own) and echoes each "mark" once the audio before it
		// played (the same reference).
		ResumeNotice: []string{`{"event":"clear"}`},
		LegEvents:    []plugins.LegEvent{{Sent: "mark", Name: "mark.name"}}}, nil
}

// parseSettings refuses a public key it cannot use and a <Stream>
// attribute Telnyx does not document (either would fail every call);
// an unknown failure_mode is a warning, as for the other providers.
func parseSettings(s plugins.Settings) (*settings, plugins.Configured, error) {
	keys, err := ParsePublicKeys(s[SettingAuthTokens])
	next := &settings{keys: keys, say: or(s[SettingSayMessage], DefaultSayMessage), ended: or(s[SettingEndedMessage], DefaultEndedMessage),
		track: or(s[SettingTrack], DefaultTrack), bidirectional: or(s[SettingBidirectionalMode], DefaultBidirectionalMode)}
	if err == nil {
		err = oneOf(SettingTrack, next.track, "inbound_track", "outbound_track", "both_tracks")
	}
	if err == nil {
		err = oneOf(SettingBidirectionalMode, next.bidirectional, "rtp", "mp3")
	}
	if err != nil {
		return nil, plugins.Configured{}, err
	}
	var warnings []string
	switch s[SettingFailureMode] {
	case "", "say":
	case "fallback":
		next.fallback = true
	default:
		warnings = append(warnings, `failure_mode must be "say" or "fallback"; using "say"`)
	}
	return next, plugins.Configured{Verifies: next.keys.Len() > 0, Warnings: warnings}, nil
}

func oneOf(key, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return &plugins.InvalidSetting{Key: key, Reason: fmt.Sprintf("%q is not one of %q", v, allowed)}
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Webhook implements plugins.Provider: verify, then parse. Only POST is
// taken: a TeXML application whose voice method is GET sends its
// parameters in the query, which Telnyx's signature (timestamp and body)
// does not cover.
func (p *Provider) Webhook(_ context.Context, req *plugins.Request) (*plugins.WebhookResult, error) {
	s := p.Current()
	if req.Method != http.MethodPost {
		return plugins.Reject(http.StatusMethodNotAllowed, "method_not_allowed",
			"Telnyx webhooks must be POST: set the TeXML application's voice method to POST"), nil
	}
	var nonce string
	if s.keys.Len() > 0 {
		sig, err := Verify(s.keys, req.Header.Get(TimestampHeader), req.Header.Get(SignatureHeader), req.Body, p.now())
		if err != nil {
			return plugins.RejectForbidden(err.Error()), nil
		}
		// Only a verified signature is reported: a forger cannot spend one.
		// Its bytes, re-encoded, are one spelling per signed request.
		nonce = "ed25519:" + base64.StdEncoding.EncodeToString(sig)
	}
	form, err := params(req.Header.Get("Content-Type"), req.Body)
	if err != nil {
		return withNonce(plugins.RejectBadRequest(err.Error()), nonce), nil
	}
	if req.Route == RouteStatus {
		return statusCallback(form, nonce), nil
	}
	callSid := form.Get("CallSid")
	if callSid == "" {
		return withNonce(plugins.RejectBadRequest("CallSid is missing"), nonce), nil
	}
	callID, ok := CallID(callSid)
	if !ok {
		return withNonce(plugins.RejectBadRequest("CallSid is not a Telnyx call control id (v3:...)"), nonce), nil
	}
	ar := plugins.CallQuery(req.Query(), callID)
	ar.Extras = map[string]string{"from": form.Get("From"), "to": form.Get("To"), "account_sid": form.Get("AccountSid"), "call_sid": callSid}
	tmpl, err := plugins.NewTemplate(plugins.EscapeXML, func(a plugins.Allocation) (*plugins.Response, error) {
		return streamAnswer(s, a, req.CallbackBase)
	})
	if err != nil {
		return nil, err
	}
	return &plugins.WebhookResult{Allocate: ar, Template: tmpl, Nonce: nonce}, nil
}

// withNonce spends the nonce of a signed request refused for its content,
// so that a replay of it is refused before it is read again.
func withNonce(res *plugins.WebhookResult, nonce string) *plugins.WebhookResult {
	res.Nonce = nonce
	return res
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
		// A TeXML application fetches its failover URL when the webhook
		// URL answers an HTTP error or does not answer.
		return plugins.FallbackAnswer(f), nil
	}
	status, msg := plugins.SpokenRefusal(f, s.fallback, s.say, s.ended)
	return sayHangupAnswer(status, msg)
}
