package plugins

import (
	"net/http"

	"github.com/edge-voice/edge/plugins/internal/pb"
)

// Conversions between the Go types of the contract and the generated ones.
// Both adapters use them, so a field added to one side is added here once.

func headersToPB(h http.Header) []*pb.Header {
	if len(h) == 0 {
		return nil
	}
	out := make([]*pb.Header, 0, len(h))
	for k, v := range h {
		out = append(out, &pb.Header{Name: k, Values: v})
	}
	return out
}

func headersFromPB(hs []*pb.Header) http.Header {
	h := make(http.Header, len(hs))
	for _, x := range hs {
		// CanonicalHeaderKey: a plugin in another language may send any case.
		k := http.CanonicalHeaderKey(x.GetName())
		h[k] = append(h[k], x.GetValues()...)
	}
	return h
}

func requestToPB(r *Request) *pb.WebhookRequest {
	return &pb.WebhookRequest{
		Route: r.Route, Method: r.Method, Url: r.URL, Headers: headersToPB(r.Header),
		RawQuery: r.RawQuery, Body: r.Body, RemoteIp: r.RemoteIP, CallbackBase: r.CallbackBase,
	}
}

func requestFromPB(r *pb.WebhookRequest) *Request {
	return &Request{
		Route: r.GetRoute(), Method: r.GetMethod(), URL: r.GetUrl(), Header: headersFromPB(r.GetHeaders()),
		RawQuery: r.GetRawQuery(), Body: r.GetBody(), RemoteIP: r.GetRemoteIp(), CallbackBase: r.GetCallbackBase(),
	}
}

func allocReqToPB(a *AllocationRequest) *pb.AllocationRequest {
	return &pb.AllocationRequest{CallId: a.CallID, MerchantId: a.MerchantID, Flow: a.Flow, Template: a.Template, Extras: a.Extras,
		MediaParams: a.MediaParams}
}

func allocReqFromPB(a *pb.AllocationRequest) AllocationRequest {
	return AllocationRequest{CallID: a.GetCallId(), MerchantID: a.GetMerchantId(), Flow: a.GetFlow(), Template: a.GetTemplate(), Extras: a.GetExtras(),
		MediaParams: a.GetMediaParams()}
}

func mediaParamsToPB(ps []MediaParam) []*pb.MediaParam {
	var out []*pb.MediaParam
	for _, p := range ps {
		out = append(out, &pb.MediaParam{Name: p.Name, Values: p.Values, Pattern: p.Pattern})
	}
	return out
}

func mediaParamsFromPB(ps []*pb.MediaParam) []MediaParam {
	var out []MediaParam
	for _, p := range ps {
		out = append(out, MediaParam{Name: p.GetName(), Values: p.GetValues(), Pattern: p.GetPattern()})
	}
	return out
}

func responseToPB(r *Response) *pb.HTTPResponse {
	return &pb.HTTPResponse{Status: int32(r.Status), ContentType: r.ContentType, Body: r.Body, Headers: headersToPB(r.Header)}
}

func responseFromPB(r *pb.HTTPResponse) *Response {
	resp := &Response{Status: int(r.GetStatus()), ContentType: r.GetContentType(), Body: r.GetBody()}
	if len(r.GetHeaders()) > 0 {
		resp.Header = headersFromPB(r.GetHeaders())
	}
	return resp
}

func templateToPB(t *Template) *pb.AnswerTemplate {
	parts := make([]*pb.TemplatePart, len(t.Parts))
	for i, p := range t.Parts {
		parts[i] = &pb.TemplatePart{Literal: p.Literal, Slot: pb.Slot(p.Slot), Escape: pb.Escape(p.Escape)}
	}
	return &pb.AnswerTemplate{Status: int32(t.Status), ContentType: t.ContentType, Parts: parts}
}

func templateFromPB(t *pb.AnswerTemplate) *Template {
	parts := make([]Part, len(t.GetParts()))
	for i, p := range t.GetParts() {
		parts[i] = Part{Literal: p.GetLiteral(), Slot: Slot(p.GetSlot()), Escape: Escape(p.GetEscape())}
	}
	return &Template{Status: int(t.GetStatus()), ContentType: t.GetContentType(), Parts: parts}
}

func webhookResultToPB(w *WebhookResult) *pb.WebhookResponse {
	out := &pb.WebhookResponse{}
	switch {
	case w.Allocate != nil:
		out.Result = &pb.WebhookResponse_Allocate{Allocate: allocReqToPB(w.Allocate)}
	case w.Answer != nil:
		out.Result = &pb.WebhookResponse_Answer{Answer: responseToPB(w.Answer)}
	}
	if w.Template != nil {
		out.Template = templateToPB(w.Template)
	}
	out.Nonce, out.Account = w.Nonce, w.Account
	if w.Ended != nil {
		out.Ended = &pb.CallEnd{CallId: w.Ended.CallID, Event: w.Ended.Event}
	}
	return out
}

func webhookResultFromPB(w *pb.WebhookResponse) *WebhookResult {
	out := &WebhookResult{}
	if a := w.GetAllocate(); a != nil {
		req := allocReqFromPB(a)
		out.Allocate = &req
	}
	if a := w.GetAnswer(); a != nil {
		out.Answer = responseFromPB(a)
	}
	if t := w.GetTemplate(); t != nil {
		out.Template = templateFromPB(t)
	}
	out.Nonce, out.Account = w.GetNonce(), w.GetAccount()
	if e := w.GetEnded(); e != nil {
		out.Ended = &CallEnd{CallID: e.GetCallId(), Event: e.GetEvent()}
	}
	return out
}

var failureKinds = map[FailureKind]pb.FailureKind{
	FailureInternal:       pb.FailureKind_FAILURE_INTERNAL,
	FailureNoCapacity:     pb.FailureKind_FAILURE_NO_CAPACITY,
	FailureInvalidRequest: pb.FailureKind_FAILURE_INVALID_REQUEST,
	FailureUnavailable:    pb.FailureKind_FAILURE_UNAVAILABLE,
}

func answerReqToPB(a *AnswerRequest) *pb.AnswerRequest {
	out := &pb.AnswerRequest{Request: allocReqToPB(&a.Request), CallbackBase: a.CallbackBase}
	switch {
	case a.Allocation != nil:
		al := a.Allocation
		out.Outcome = &pb.AnswerRequest_Allocation{Allocation: &pb.Allocation{
			CallId: al.CallID, PodName: al.PodName, WsUrl: al.WSURL, SourcePool: al.SourcePool, WasExisting: al.WasExisting,
		}}
	case a.Failure != nil:
		f := a.Failure
		out.Outcome = &pb.AnswerRequest_Failure{Failure: &pb.Failure{
			Kind: failureKinds[f.Kind], Reason: f.Reason, Message: f.Message, Status: int32(f.Status), Fallback: f.Fallback,
		}}
	}
	return out
}

func answerReqFromPB(a *pb.AnswerRequest) *AnswerRequest {
	out := &AnswerRequest{Request: allocReqFromPB(a.GetRequest()), CallbackBase: a.GetCallbackBase()}
	if al := a.GetAllocation(); al != nil {
		out.Allocation = &Allocation{
			CallID: al.GetCallId(), PodName: al.GetPodName(), WSURL: al.GetWsUrl(),
			SourcePool: al.GetSourcePool(), WasExisting: al.GetWasExisting(),
		}
	}
	if f := a.GetFailure(); f != nil {
		kind := FailureInternal
		for k, v := range failureKinds {
			if v == f.GetKind() {
				kind = k
			}
		}
		out.Failure = &Failure{Kind: kind, Reason: f.GetReason(), Message: f.GetMessage(), Status: int(f.GetStatus()), Fallback: f.GetFallback()}
	}
	return out
}
