package providers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
	"github.com/edge-voice/edge/forwarded"
	"github.com/edge-voice/edge/plugins"
)

// ServeHTTP serves POST /api/v1/{provider}/allocate, a plugin's declared
// routes at /api/v1/{provider}/{route} and /providers/{name}/{route...}
// (patterns registered by api.Surface).
func (h *Host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name, route := r.PathValue("provider"), plugins.RouteAllocate
	if rt := r.PathValue("route"); rt != "" {
		route = rt
	}
	if name == "" {
		name = r.PathValue("name")
		route = strings.TrimPrefix(r.URL.Path, "/providers/"+name+"/")
	}
	p, ok := h.procs[name]
	if !ok {
		writeJSON(w, http.StatusNotFound, "unknown_provider", "unknown provider")
		return
	}
	if route == plugins.RouteAllocate && r.PathValue("route") != "" {
		// The allocate route's own patterns take GET and POST only.
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST or GET")
		return
	}
	r, end := h.startWebhook(r, name, route)
	outcome := h.serve(w, r, p, route)
	if end != nil {
		end(outcome)
	}
	h.m.webhooks.WithLabelValues(name, outcome).Inc()
	h.m.seconds.WithLabelValues(name).Observe(time.Since(start).Seconds())
}

// serve answers one webhook and returns its outcome for the metrics.
func (h *Host) serve(w http.ResponseWriter, r *http.Request, p *proc, route string) string {
	l := p.live.Load()
	if l == nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, "provider_unavailable", "provider plugin is not running")
		return "unavailable"
	}
	if route != plugins.RouteAllocate && !declared(l.routes, r.Method, route) {
		writeJSON(w, http.StatusNotFound, "not_found", "no such provider route")
		return "rejected"
	}
	limit := int64(calls.DefaultMaxBodyBytes)
	if h.opts.MaxBody != nil {
		limit = h.opts.MaxBody()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, "body_too_large", "request body too large")
			return "too_large"
		}
		writeJSON(w, http.StatusBadRequest, "invalid_request", "could not read the body")
		return "rejected"
	}
	spec := p.spec.Load()
	req := &plugins.Request{
		Route: route, Method: r.Method, URL: h.publicURL(r, spec), Header: r.Header,
		RawQuery: r.URL.RawQuery, Body: body, RemoteIP: h.remoteIP(r), CallbackBase: h.callbackBase(p.name, spec),
	}
	res, err := call(h, p, "Webhook", r.Context(), func(ctx context.Context) (*plugins.WebhookResult, error) {
		return l.prov.Webhook(ctx, req)
	})
	if err != nil {
		return h.pluginFailed(w, p, err)
	}
	if res.Nonce != "" {
		if outcome, refused := h.spendNonce(w, r, p, l, res); refused {
			return outcome
		}
	}
	if res.Answer != nil {
		outcome := "answered"
		if res.Ended != nil && res.Answer.Status >= 200 && res.Answer.Status < 300 {
			if outcome, ok := h.knownAccount(w, p, res); !ok {
				return outcome
			}
			var failed bool
			if outcome, failed = h.endCall(w, r, p, res.Ended, res.Account); failed {
				return outcome
			}
		}
		writeResponse(w, res.Answer)
		if res.Answer.Status >= 400 {
			return "rejected"
		}
		return outcome
	}
	if res.Allocate == nil {
		writeJSON(w, http.StatusInternalServerError, "plugin_error", "provider plugin gave no answer")
		return "plugin_error"
	}
	if outcome, ok := h.knownAccount(w, p, res); !ok {
		return outcome
	}
	return h.allocate(w, r, p, l, res, req.CallbackBase)
}

// spendNonce records the nonce of a verified webhook in Redis and refuses
// the webhook when some replica saw it before (within providers.nonce_ttl):
// it is a replay of a captured request, which must learn nothing, least of
// all a live call's media URL. The check is here, not in the plugin, so
// that every replica and every plugin process (a restarted one too) share
// one memory; the plugin reports the nonce only once the signature over it
// verified, so a forger cannot spend nonces. Redis failing is edge's
// fault: answered as when the allocation cannot be made.
func (h *Host) spendNonce(w http.ResponseWriter, r *http.Request, p *proc, l *live, res *plugins.WebhookResult) (string, bool) {
	if h.opts.Nonces == nil {
		return "", false
	}
	first, err := h.opts.Nonces.FirstUse(r.Context(), p.name, res.Nonce, h.opts.Current().nonceTTL())
	switch {
	case err != nil && res.Allocate != nil:
		return h.refuse(w, r, p, l, *res.Allocate, err), true
	case err != nil:
		f := calls.FailureOf(err)
		p.log.Warn("webhook nonce could not be checked", "err", err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, f.Status, f.Code, f.Message)
		return f.Code, true
	case !first:
		p.log.Info("webhook refused: its nonce was seen before (a replay)", "remote_ip", h.remoteIP(r))
		writeJSON(w, http.StatusForbidden, "replayed", "the request's nonce was seen before: a replay")
		return "replayed", true
	}
	return "", false
}

// allocate runs the allocation a webhook asked for and sends its answer:
// from the template when the plugin gave one, else through Answer.
func (h *Host) allocate(w http.ResponseWriter, r *http.Request, p *proc, l *live, res *plugins.WebhookResult, callbackBase string) string {
	ar := *res.Allocate
	annotateCall(r.Context(), ar.CallID, ar.MerchantID)
	if outcome, ok := h.merchantAllowed(w, r, p, l, res.Account, ar); !ok {
		return outcome
	}
	// Undeclared or disallowed parameters are the plugin's fault, found
	// before a pod is taken.
	query, err := l.params.query(ar.MediaParams)
	if err != nil {
		p.log.Error("provider plugin asked for a media URL parameter it may not set", "call_sid", ar.CallID, "err", err)
		writeJSON(w, http.StatusInternalServerError, "plugin_error", "provider plugin error")
		return "plugin_error"
	}
	c, err := h.opts.Calls.Allocate(r.Context(), calls.Request{
		CallID: ar.CallID, MerchantID: ar.MerchantID, Provider: p.name, Flow: ar.Flow, Template: ar.Template,
		Creator: "provider:" + p.name, Account: res.Account, MediaQuery: query,
	})
	if errors.Is(err, allocator.ErrOtherAccount) {
		return otherAccount(w, p, ar.CallID, res.Account, "webhook")
	}
	if err != nil {
		return h.refuse(w, r, p, l, ar, err)
	}
	a := &plugins.Allocation{
		CallID: c.ID, PodName: c.Pod, WSURL: c.WSURL, SourcePool: c.SourcePool, WasExisting: c.WasExisting,
	}
	if res.Template != nil {
		resp, terr := res.Template.Render(*a)
		if terr == nil {
			writeResponse(w, resp)
			return "allocated"
		}
		p.log.Warn("provider answer template unusable; asking the plugin", "err", terr)
	}
	resp, err := call(h, p, "Answer", r.Context(), func(ctx context.Context) (*plugins.Response, error) {
		return l.prov.Answer(ctx, &plugins.AnswerRequest{Request: ar, Allocation: a, CallbackBase: callbackBase})
	})
	if err != nil {
		// The pod is allocated; a provider retry gets the same one.
		return h.pluginFailed(w, p, err)
	}
	writeResponse(w, resp)
	return "allocated"
}

// refuse answers a failed allocation. A refusal about the call is
// answered in the provider's own markup (the plugin's failure answer),
// with the status calls.FailureOf gives it. edge's own failure
// (calls.Failure.EdgeFault) is answered so that the provider calls the
// number's fallback URL, unless unavailable_answer says markup.
func (h *Host) refuse(w http.ResponseWriter, r *http.Request, p *proc, l *live, ar plugins.AllocationRequest, err error) string {
	f := calls.FailureOf(err)
	fail := &plugins.Failure{Kind: plugins.FailureInternal, Message: f.Message, Status: f.Status}
	outcome := "internal"
	switch {
	case f.EdgeFault():
		fail.Kind, fail.Reason, outcome = plugins.FailureUnavailable, f.Code, f.Code
		fail.Fallback = h.opts.Current().unavailableFallback(p.name)
	case f.Kind == calls.KindNoCapacity:
		fail.Kind, fail.Reason, outcome = plugins.FailureNoCapacity, f.Code, f.Code
	case f.Kind == calls.KindEnded:
		// Plugins render no capacity as a hangup: what an ended call's
		// late or replayed webhook must get (Reason tells them apart, so
		// that it is not told that no agent is available).
		fail.Kind, fail.Reason, outcome = plugins.FailureNoCapacity, f.Code, f.Code
	case f.Kind == calls.KindInvalid:
		fail.Kind, outcome = plugins.FailureInvalidRequest, "invalid_request"
	}
	// Refusals (no capacity, an ended call) are logged by calls.Service,
	// aggregated; an invalid request is the caller's problem (debug).
	switch f.Kind {
	case calls.KindNoCapacity, calls.KindEnded:
	case calls.KindInvalid:
		p.log.Debug("webhook allocation invalid", "code", f.Code, "err", err)
	default:
		p.log.Warn("webhook allocation failed", "call_sid", ar.CallID, "merchant_id", ar.MerchantID, "code", f.Code,
			"fallback", fail.Fallback, "err", err)
	}
	return h.answerFailure(w, r, p, l, ar, f, fail, outcome)
}

// answerFailure sends the plugin's answer to fail, the failure f of ar,
// and returns outcome; edge answers f in its own JSON itself when the
// plugin cannot render it or does not answer.
func (h *Host) answerFailure(w http.ResponseWriter, r *http.Request, p *proc, l *live, ar plugins.AllocationRequest,
	f calls.Failure, fail *plugins.Failure, outcome string) string {
	if fail.Fallback && !l.rendersFallback {
		// A plugin built before Failure.Fallback would answer with its
		// markup (the kind reads as internal to it): edge answers for it
		// with the failure's status, an HTTP error to every provider.
		writeJSON(w, f.Status, f.Code, f.Message)
		return outcome
	}
	resp, aerr := call(h, p, "Answer", r.Context(), func(ctx context.Context) (*plugins.Response, error) {
		return l.prov.Answer(ctx, &plugins.AnswerRequest{Request: ar, Failure: fail})
	})
	if aerr != nil {
		writeJSON(w, f.Status, f.Code, f.Message)
		return outcome
	}
	writeResponse(w, resp)
	return outcome
}

// call runs one RPC under the RPC deadline, with its metrics; a failed RPC
// makes the supervisor check the plugin at once.
func call[T any](h *Host, p *proc, method string, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, h.opts.Config.RPCTimeout)
	defer cancel()
	start := time.Now()
	v, err := f(ctx)
	h.m.rpcSeconds.WithLabelValues(p.name, method).Observe(time.Since(start).Seconds())
	if err != nil {
		h.m.rpcErrors.WithLabelValues(p.name, method).Inc()
		p.poke()
	}
	return v, err
}

// pluginFailed answers a failed RPC: 503 when the plugin is down or slow
// (the provider may retry or fall back), 500 when it returned an error.
func (h *Host) pluginFailed(w http.ResponseWriter, p *proc, err error) string {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		p.log.Warn("provider plugin did not answer", "err", err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, "provider_unavailable", "provider plugin is not answering")
		return "unavailable"
	}
	p.log.Error("provider plugin failed", "err", err)
	writeJSON(w, http.StatusInternalServerError, "plugin_error", "provider plugin error")
	return "plugin_error"
}

func declared(routes []plugins.Route, method, path string) bool {
	for _, r := range routes {
		if r.Path == path && (r.Method == "" || r.Method == method) {
			return true
		}
	}
	return false
}

// callbackBase is where the provider's routes are, as answers name them
// ("https://edge.example.com/api/v1/twilio"): "" without a configured
// webhook base, for a URL built from what the request says of edge's name
// is a guess an answer must not pass on.
func (h *Host) callbackBase(name string, s *Spec) string {
	base := s.WebhookBaseURL
	if base == "" {
		base = h.opts.Current().WebhookBaseURL
	}
	if base == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/api/v1/" + name
}

// publicURL is the URL the provider called, as it signed it.
func (h *Host) publicURL(r *http.Request, s *Spec) string {
	base := s.WebhookBaseURL
	if base == "" {
		base = h.opts.Current().WebhookBaseURL
	}
	if base == "" {
		t := h.trusted()
		base = t.Scheme(r) + "://" + t.Host(r)
	}
	u := strings.TrimRight(base, "/") + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	return u
}

// remoteIP is the caller's address: the connection's peer, or the client a
// trusted proxy names (forwarded.Trusted.ClientIP).
func (h *Host) remoteIP(r *http.Request) string {
	return h.trusted().ClientIP(r).String()
}

func (h *Host) trusted() *forwarded.Trusted {
	if h.opts.Trusted == nil {
		return nil
	}
	return h.opts.Trusted()
}

func writeResponse(w http.ResponseWriter, resp *plugins.Response) {
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if resp.ContentType != "" {
		w.Header().Set("Content-Type", resp.ContentType)
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	status := resp.Status
	if status < 100 || status > 599 {
		status = http.StatusInternalServerError
	}
	w.WriteHeader(status)
	w.Write(resp.Body)
}

// writeJSON answers in the shape of edge's own API errors.
func writeJSON(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"success": false, "error": msg, "code": code})
}
