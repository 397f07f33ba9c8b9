package plugins

import (
	"context"
	"net/http"
	"net/url"
)

// Provider is what a provider plugin implements. Every method gets the
// host's deadline in ctx. Errors are for the unexpected (the host answers
// 500); a rejected webhook is an answer (WebhookResult.Answer), not an error.
type Provider interface {
	// Describe names the provider and its extra routes.
	Describe(ctx context.Context) (Description, error)
	// Configure hands over the settings from edge's config. It is called
	// after every start of the plugin process and again on config reloads,
	// so it must replace, not merge.
	Configure(ctx context.Context, s Settings) (Configured, error)
	// Webhook verifies and parses one request. Verify before anything else:
	// nothing may change for a rejected webhook.
	Webhook(ctx context.Context, req *Request) (*WebhookResult, error)
	// Answer renders an allocation or a failure for the provider.
	Answer(ctx context.Context, req *AnswerRequest) (*Response, error)
}

// Description names a provider and the routes it adds.
type Description struct {
	// Name is the provider's name in URLs and config: [a-z0-9_-], at most
	// 32 bytes. It serves POST /api/v1/{Name}/allocate.
	Name string
	// Routes are extra routes under /providers/{Name}/.
	Routes []Route
	// RendersFallback is true when Answer renders a Failure with Fallback
	// set (the answer on which the provider calls the number's fallback
	// URL). A plugin built before the field leaves it false and is never
	// sent such a failure: edge answers it itself with Failure.Status
	// (503), the non-2xx answer providers take as their primary URL
	// failing.
	RendersFallback bool
	// MediaHandshakeRetries is how many times the provider opens the media
	// WebSocket again, on its own, after edge answered its handshake with
	// an error (Exotel's Voicebot applet retries once). edge keeps the call
	// through that many failed handshakes (a pod it could not reach): the
	// claim is dropped and the call left to its lease, so that the retry
	// is admitted and dials again instead of finding the call ended (403).
	// The retry's own failure ends the call. 0, and a plugin built before
	// the field: the first failed handshake ends the call.
	MediaHandshakeRetries int
	// MediaParams are the query parameters this provider reads from its
	// media URL (Exotel's sample-rate), each with the values allowed. A
	// webhook asks for them per call (AllocationRequest.MediaParams); edge
	// refuses any parameter not declared here, signs the query with the
	// call's media token, and admits the provider's socket only with
	// exactly that query. None, and a plugin built before the field: media
	// URLs carry no query.
	MediaParams []MediaParam
	// ResumeReplay are the JSON "event" values of the text messages that
	// open the provider's media stream, in the order the provider sends
	// them, that a pod taking over a call mid-stream must see again
	// (Twilio: "connected", "start"). When the pod's side of a call's
	// media socket dies, edge can move the call to another pod: it keeps
	// the stream's first len(ResumeReplay) data messages from the
	// provider, each checked to be a JSON text message whose "event"
	// field is the name declared at its position, and sends them to the
	// new pod, byte for byte as the provider sent them, before relaying on.
	// A stream whose opening does not match is not kept, and its call
	// ends with its pod as before. Declare only messages that stay true
	// for the rest of the stream: one that carries state of the socket it
	// came on (a per-connection key or sequence the pod must answer) must
	// not be replayed to another socket, and a provider whose opening
	// carries such state declares none. At most 4 names, each 1 to 32
	// bytes of [a-z0-9_-], none twice: edge refuses to start a plugin
	// whose declaration breaks these rules. None, and a plugin built
	// before the field: the provider's calls cannot move to another pod
	// and end with their pod.
	ResumeReplay []string
	// MediaHeaders name the headers of the provider's media WebSocket
	// upgrade that a pod may read, as the provider sends them (Twilio:
	// X-Twilio-Signature, its signature over the stream's URL). A pod's
	// upgrade carries the path, the signed media parameters, edge's own
	// headers (X-Forwarded-*, Traceparent, Edge-Media-Params,
	// Edge-Resumed) and these; any other header a client sends (Cookie,
	// Authorization, Origin, Sec-WebSocket-Extensions, ...) stops at
	// edge, so that whoever holds a media URL cannot shape what the pod
	// reads. At most 8 header names, none of the upgrade's own
	// (Connection, Upgrade, Host, Sec-WebSocket-*), the hop-by-hop ones or
	// edge's: edge refuses to start a plugin that declares otherwise.
	// None, and a plugin built before the field: no client header reaches
	// a pod.
	MediaHeaders []string
	// MediaSubprotocols are the WebSocket subprotocols the provider's
	// media stream may offer (Sec-WebSocket-Protocol); edge passes a pod
	// only these, in the client's order. At most 8 RFC 6455 tokens. None,
	// and a plugin built before the field: no subprotocol is offered to a
	// pod.
	MediaSubprotocols []string
	// ResumeNotice are the JSON text messages edge sends the provider
	// right after a call moved to another pod, before anything of the new
	// pod, so that the provider drops what it holds of the dead pod
	// (Twilio: {"event":"clear","streamSid":"{{start.streamSid}}"}, which
	// stops the audio the dead pod queued, and with it echoes the marks
	// it sent). Each is a template: a JSON object with a string "event",
	// in which a JSON string that is exactly {{event.path}} is replaced
	// by the value at path (dot-separated object keys) of the opening
	// message of that event (one ResumeReplay names), as the provider
	// sent it. A notice whose placeholder the opening lacks is not sent.
	// At most 4, each at most 1 KiB, placeholders naming only declared
	// ResumeReplay events and paths of 1 to 4 keys of [A-Za-z0-9_]: edge
	// refuses to start a plugin that declares otherwise. None, and a
	// plugin built before the field: the provider is told nothing of a
	// move.
	ResumeNotice []string
	// LegEvents are the messages a pod sends that the provider answers
	// later, by name (Twilio's mark, echoed once the audio before it has
	// played): once a call moved, the provider's answers to what a dead
	// pod sent are not delivered to the pod that took the call over,
	// which never sent them. At most 4, none answered by the same event
	// as another: edge refuses to start a plugin that declares otherwise.
	// None, and a plugin built before the field: every provider message
	// reaches the pod of the moment.
	LegEvents []LegEvent
}

// LegEvent is one pair of messages by name (Description.LegEvents): the
// pod's message of event Sent names something at path Name, and the
// provider answers with a message of event Echo carrying the same name
// at the same path. Sent and Echo are [A-Za-z0-9_-], 1 to 32 bytes (Echo ""
// is Sent); Name is 1 to 4 dot-separated keys of [A-Za-z0-9_].
type LegEvent struct {
	Sent, Echo, Name string
}

// MediaParam is a media URL query parameter a provider may set, and the
// values allowed: one of Values, or a match of Pattern. Whatever they say,
// Name must be [A-Za-z0-9_.-] (at most 32 bytes) and a value
// [A-Za-z0-9_.~-] (at most 64 bytes, not "." or ".."), the only bytes a
// media URL's query may carry without escapes. edge refuses to start a
// plugin whose declaration breaks these rules.
type MediaParam struct {
	Name   string
	Values []string
	// Pattern is an RE2 expression (Go's regexp) a whole value must
	// match; "" allows only Values.
	Pattern string
}

// Route is one extra route, at /providers/{name}/{Path}.
type Route struct {
	Method string // "" for any method
	Path   string // without a leading slash, e.g. "status"
}

// RouteAllocate is Request.Route for the predecessor's
// /api/v1/{name}/allocate.
const RouteAllocate = "allocate"

// Settings are a provider's settings from edge's config, secrets included.
// Keys edge sets for every provider (Credentials reads both forms):
//
//	auth_tokens            comma-separated tokens or credentials of the provider's
//	                       single account, newest first (rotation)
//	auth_tokens.<account>  the same for one of several accounts, instead of
//	                       auth_tokens: a webhook its tokens verify reports
//	                       <account> (WebhookResult.Account)
type Settings map[string]string

// Configured is what a provider reports after Configure.
type Configured struct {
	// Verifies is true when webhooks are authenticated with these settings.
	// edge warns loudly at start when it is false.
	Verifies bool
	Warnings []string
}

// Request is one webhook as the provider sent it.
type Request struct {
	// Route is RouteAllocate or the Path of a declared Route.
	Route  string
	Method string
	// URL is the full public URL the provider called (scheme://host/path?query),
	// rebuilt from edge's configured webhook base: what providers sign.
	URL      string
	Header   http.Header
	RawQuery string
	Body     []byte
	// RemoteIP is the caller's IP address as edge sees it.
	RemoteIP string
	// CallbackBase is the public URL under which this provider's routes
	// are served, "<webhook_base_url>/api/v1/{name}" without a trailing
	// slash: name status callbacks in an answer below it
	// (CallbackBase + "/status"). "" when providers.webhook_base_url is
	// not set (edge would only guess its public name): name none then.
	CallbackBase string
}

// Query parses RawQuery (invalid pairs are dropped, as net/http does).
func (r *Request) Query() url.Values {
	q, _ := url.ParseQuery(r.RawQuery)
	return q
}

// WebhookResult is a parsed webhook: exactly one of Allocate or Answer.
type WebhookResult struct {
	// Ended, with an Answer of status 2xx, reports that the call has ended
	// (a status callback: the caller hung up, the media stream stopped or
	// failed to open). edge ends the call before it sends Answer: at once
	// when its media socket never opened (the pod goes back to its pool),
	// else when the socket closes. Only the plugin knows which of its
	// provider's events end a call; set Ended for those alone, and only
	// once the request verified.
	Ended *CallEnd
	// Allocate asks edge to allocate a pod for the call.
	Allocate *AllocationRequest
	// Template, with Allocate, is the success answer with slots; edge
	// renders it and does not call Answer for a success. Optional.
	Template *Template
	// Answer is sent as it is: a rejection or an acknowledgement.
	Answer *Response
	// Nonce, with Allocate or Answer, is a value the provider sends once
	// per request (Plivo's V3 nonce); set it only after the provider's
	// signature over it verified, so that a forger cannot spend nonces.
	// edge refuses (403) a request of this provider whose nonce it has
	// seen within providers.nonce_ttl, on any replica, through Redis:
	// a captured webhook replayed elsewhere or after a plugin restart
	// gets no answer. "": nothing to check.
	Nonce string
	// Account, with Allocate or Ended, is the account whose credentials
	// verified the webhook (the <account> of its auth_tokens.<account>
	// setting): a label, never a secret. edge stores it with the call it
	// allocates, and ends or answers a call only for webhooks of the
	// account that created it, so that one account's tokens cannot end or
	// take over another's calls; an account bound to merchants allocates
	// only for them. "" (the single account of auth_tokens, and every
	// plugin built before the field): the call belongs to no account, as
	// before. A plugin given several accounts must report one, or edge
	// refuses the webhook.
	Account string
}

// CallEnd is a provider's report that a call has ended.
type CallEnd struct {
	// CallID is the call as the provider's allocation webhook named it.
	CallID string
	// Event is the provider's name for what happened ("completed",
	// "stream-error"): [A-Za-z0-9_.-], at most 128 bytes. The call's
	// record keeps ended_by "provider:<Event>".
	Event string
}

// AllocationRequest is what a webhook asks of edge. Empty Flow and
// Template take edge's defaults.
type AllocationRequest struct {
	CallID     string
	MerchantID string
	Flow       string
	Template   string
	// Extras are provider-specific values (caller number, ...), for logs.
	Extras map[string]string
	// MediaParams are query parameters for the call's media URL
	// (name -> value), each declared in Description.MediaParams with the
	// value allowed; a webhook asking for one that is not is a plugin
	// error (500, nothing allocated).
	MediaParams map[string]string
}

// AnswerRequest is an outcome to render: exactly one of Allocation or
// Failure.
type AnswerRequest struct {
	Request    AllocationRequest
	Allocation *Allocation
	Failure    *Failure
	// CallbackBase is the webhook's Request.CallbackBase.
	CallbackBase string
}

// Allocation is a successful allocation.
type Allocation struct {
	CallID      string
	PodName     string
	WSURL       string // the media WebSocket URL the provider must open
	SourcePool  string
	WasExisting bool // a retry of a webhook already allocated
}

// FailureKind is why an allocation failed.
type FailureKind int

// Failure kinds. Unknown kinds from a newer host read as FailureInternal.
const (
	FailureInternal FailureKind = iota
	FailureNoCapacity
	FailureInvalidRequest
	// FailureUnavailable: edge cannot serve for reasons of its own (Redis
	// unreachable, a backend timeout, an internal error), nothing about
	// the call. With Failure.Fallback, answer so that the provider calls
	// the number's fallback URL. A plugin built before this kind reads it
	// as FailureInternal.
	FailureUnavailable
)

func (k FailureKind) String() string {
	switch k {
	case FailureNoCapacity:
		return "no_capacity"
	case FailureInvalidRequest:
		return "invalid_request"
	case FailureUnavailable:
		return "unavailable"
	default:
		return "internal"
	}
}

// No capacity reasons (Failure.Reason), as the allocator names them.
const (
	ReasonNoPods      = "no_pods"
	ReasonAllDraining = "all_draining"
	ReasonAtCapacity  = "at_capacity"
	// ReasonMerchantAtCap: the merchant's max_calls cap is reached;
	// other merchants still get pods.
	ReasonMerchantAtCap = "merchant_at_cap"
	// ReasonRateLimited: the merchant or the source started calls faster
	// than edge's admission rate; Status is 429.
	ReasonRateLimited = "rate_limited"
	// ReasonCallEnded: the call has ended; a late or replayed webhook for
	// it gets the hangup answer, never a pod. It comes with
	// FailureNoCapacity, so that a plugin that does not know the reason
	// still hangs up; one that does should say the call has ended, not
	// that no agent is available.
	ReasonCallEnded = "call_ended"
)

// Reasons of FailureUnavailable (Failure.Reason).
const (
	ReasonRedisUnavailable = "redis_unavailable"
	ReasonTimeout          = "timeout"
	ReasonInternal         = "internal"
)

// Failure is a failed allocation.
type Failure struct {
	Kind FailureKind
	// Reason refines the kind (ReasonNoPods, ReasonCallEnded,
	// ReasonRedisUnavailable, ...).
	Reason string
	// Message is safe to show the caller (never a cause's details).
	Message string
	// Status is the HTTP status edge's generic API answers for this
	// failure (503, 400, 500): a provider may use it as it is.
	Status int
	// Fallback, set only with FailureUnavailable and only for a plugin
	// whose Description has RendersFallback, asks for the answer on which
	// the provider calls the number's fallback URL: a non-2xx status
	// (Status; FallbackAnswer renders one) or the provider's documented
	// equivalent. false asks for the provider's failure markup, as for any
	// other failure (the operator chose providers.unavailable_answer:
	// markup, for numbers without a fallback URL).
	Fallback bool
}

// Response is an HTTP answer.
type Response struct {
	Status      int
	ContentType string
	Header      http.Header // more headers; may be nil
	Body        []byte
}
