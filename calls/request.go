package calls

import (
	"strings"

	"github.com/edge-voice/edge/allocator"
)

// Request is a call as any face asks for it: the generic JSON endpoint or a
// provider plugin's parsed webhook.
type Request struct {
	CallID     string
	MerchantID string // optional: the default chain without one
	Provider   string // default "twilio"
	Flow       string // default "v2"; "v2" appends /v2 to the media path
	Template   string // default "order-confirmation" ("template" for exotel)
	// Creator is who asks: "provider:<name>" for a signed webhook,
	// "token:<name>" for an authenticated API caller. A repeat of a live
	// call answers its media URL only to the call's creator.
	Creator string
	// Account is the provider account whose credentials verified the
	// webhook (plugins.WebhookResult.Account), "" for none: a repeat of a
	// live call stored with an account is refused to any other
	// (allocator.ErrOtherAccount).
	Account string
	// MediaQuery is the signed query of the media URL: "" or the
	// provider's parameters from mediaurl.EncodeQuery, checked against its
	// plugin's declaration.
	MediaQuery string
}

// DefaultMaxBodyBytes bounds a request body on either face (webhooks and
// the generic API's JSON are small) unless http.max_body_bytes says
// otherwise.
const DefaultMaxBodyBytes = 64 << 10

// Defaults of the predecessor's media URL.
const (
	DefaultProvider       = "twilio"
	DefaultFlow           = "v2"
	DefaultTemplate       = "order-confirmation"
	DefaultExotelTemplate = "template"
)

// normalize fills the predecessor's defaults and validates every field that
// becomes part of a Redis key or the media URL path.
func (r *Request) normalize() error {
	if r.Provider == "" {
		r.Provider = DefaultProvider
	}
	if r.Flow == "" {
		r.Flow = DefaultFlow
	}
	if r.Template == "" {
		r.Template = DefaultTemplate
		if r.Provider == "exotel" {
			r.Template = DefaultExotelTemplate
		}
	}
	if err := allocator.ValidateID("call_sid", r.CallID); err != nil {
		return err
	}
	if r.MerchantID != "" {
		if err := allocator.ValidateID("merchant_id", r.MerchantID); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{{"provider", r.Provider}, {"flow", r.Flow}, {"template", r.Template}} {
		if err := allocator.ValidateID(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// agentPath is the path the pod is asked for, exactly as the predecessor's
// nginx hop sent it:
//
//	/agent/voice/breeze-buddy/{provider}/callback/{template}[/v2]
//
// Every part was validated to [A-Za-z0-9_.-], so nothing needs escaping.
func (r *Request) agentPath() string {
	var b strings.Builder
	b.WriteString("/agent/voice/breeze-buddy/")
	b.WriteString(r.Provider)
	b.WriteString("/callback/")
	b.WriteString(r.Template)
	if r.Flow == "v2" {
		b.WriteString("/v2")
	}
	return b.String()
}
