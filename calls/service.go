package calls

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/tracing"
)

// Allocator is what Service needs of the allocator.
type Allocator interface {
	Allocate(ctx context.Context, req allocator.Request) (allocator.Allocation, error)
	Release(ctx context.Context, callID string) (allocator.Released, error)
	EndByProvider(ctx context.Context, callID, creator, account, event string) (allocator.ProviderEnd, error)
}

// MediaURLs mints the media WebSocket URL of a call (mediaurl.Signer),
// its token covering the path and the query ("" for none).
type MediaURLs interface {
	URLWithQuery(base, callID, pod, path, query string) string
}

// Call is a call that holds a pod, with the media URL its provider opens.
type Call struct {
	ID         string
	Pod        string
	SourcePool string // "pool:<tier>" or "merchant:<id>"
	WSURL      string
	// WasExisting is true when the call already had this pod (a retry or
	// a concurrent duplicate): the same pod and a URL to the same place.
	WasExisting bool
}

// Service runs the call lifecycle for every face.
type Service struct {
	alloc   Allocator
	media   MediaURLs
	baseURL func() string
	log     *slog.Logger
	refused *refusalLog
	replays *refusalLog
}

// NewService returns a Service. baseURL returns the public ws:// or wss://
// base of media URLs (read per call, so a config reload applies at once).
func NewService(alloc Allocator, media MediaURLs, baseURL func() string, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{alloc: alloc, media: media, baseURL: baseURL, log: log,
		refused: newRefusalLog(log, 10*time.Second), replays: newReplayLog(log, 10*time.Second)}
}

// Allocate gives the call a pod and mints its media URL. A repeat for the
// same call id answers the same pod. Errors are the allocator's outcomes
// (see FailureOf) or ErrInvalidID for a request unfit for keys and URLs.
func (s *Service) Allocate(ctx context.Context, req Request) (Call, error) {
	if err := req.normalize(); err != nil {
		s.log.Debug("allocation request invalid", "call_sid", shortID(req.CallID), "provider", shortID(req.Provider), "err", err)
		return Call{}, err
	}
	// Only a valid id reaches the request's access log line.
	NoteCallID(ctx, req.CallID)
	al, err := s.alloc.Allocate(ctx, allocator.Request{CallID: req.CallID, MerchantID: req.MerchantID, Creator: req.Creator,
		Account: req.Account, TraceParent: tracing.TraceParent(ctx)})
	if al.Warning != "" {
		// Both faces land here: a bad merchant config is logged once per
		// allocation whichever way the call came.
		s.log.Warn("allocation warning", withProvider([]any{"call_sid", req.CallID, "merchant_id", req.MerchantID}, req.Creator, "warning", al.Warning)...)
	}
	if err != nil {
		// Refusals are logged here for both faces, aggregated under a
		// burst; the faces log only what else goes wrong.
		switch f := FailureOf(err); f.Kind {
		case KindNoCapacity:
			s.refused.note(f.Code, withProvider([]any{"call_sid", req.CallID, "merchant_id", req.MerchantID}, req.Creator)...)
		case KindEnded:
			s.replays.note(f.Code, withProvider([]any{"call_sid", req.CallID, "merchant_id", req.MerchantID}, req.Creator)...)
		}
		return Call{}, err
	}
	// A live call's media URL goes only to whoever created it: a stranger
	// who knows a call id must not connect before the provider does. A
	// call without a creator is the predecessor's.
	if al.WasExisting && al.Creator != "" && al.Creator != req.Creator {
		return Call{}, fmt.Errorf("%w: call %s was created by another caller", ErrCallExists, req.CallID)
	}
	// Nor to another account of the call's provider: its webhook is signed
	// with credentials that are not the call's.
	if al.WasExisting && al.Account != "" && al.Account != req.Account {
		return Call{}, fmt.Errorf("%w: call %s of account %s, asked by %q", allocator.ErrOtherAccount, req.CallID, al.Account, req.Account)
	}
	// One line per answered call at info, the first of the call's thread
	// (the media proxy logs the socket, the release logs its end).
	attrs := withProvider([]any{"call_sid", al.CallID, "merchant_id", req.MerchantID}, req.Creator,
		"pod", al.PodName, "source_pool", al.SourcePool, "was_existing", al.WasExisting)
	if al.Waited > 0 {
		// It waited for capacity (admission.wait): how long, for whoever
		// wonders why the answer was late.
		attrs = append(attrs, "waited_ms", al.Waited.Milliseconds())
	}
	s.log.Info("call allocated", attrs...)
	return Call{
		ID: al.CallID, Pod: al.PodName, SourcePool: al.SourcePool, WasExisting: al.WasExisting,
		WSURL: s.media.URLWithQuery(s.baseURL(), al.CallID, al.PodName, req.agentPath(), req.MediaQuery),
	}, nil
}

// Release ends the call's allocation (fenced, idempotent: a second release
// answers allocator.ErrCallNotFound). It is the voice agent's release; the
// media proxy releases a call whose socket closed itself.
func (s *Service) Release(ctx context.Context, callID string) (allocator.Released, error) {
	if allocator.ValidateID("call_sid", callID) == nil {
		NoteCallID(ctx, callID)
	}
	rel, err := s.alloc.Release(ctx, callID)
	if err == nil {
		s.log.Info("call released", withProvider([]any{"call_sid", callID, "merchant_id", rel.MerchantID}, rel.Creator,
			"pod", rel.PodName, "by", "agent", "returned_to_pool", rel.ReleasedToPool, "was_draining", rel.WasDraining, "stale", rel.Stale)...)
	}
	return rel, err
}

// withProvider is attrs, the call's provider (when a provider created it:
// every line of a call names the same one, read from its creator, never
// the agent path's provider segment a generic-API caller sends), then more.
func withProvider(attrs []any, creator string, more ...any) []any {
	if p := providerOf(creator); p != "" {
		attrs = append(attrs, "provider", p)
	}
	return append(attrs, more...)
}

// providerOf is the provider of a call's creator ("provider:twilio" ->
// "twilio"); a call made through the generic API or by the predecessor
// names none (the call info keeps no provider), and its line has no
// provider key.
func providerOf(creator string) string {
	name, _ := strings.CutPrefix(creator, "provider:")
	if name == creator {
		return ""
	}
	return name
}

// EndByProvider ends a call its provider's status callback says has ended
// (the caller hung up, the stream stopped or failed to open): released at
// once when no media socket holds it, else left to the socket's end (see
// allocator.Allocator.EndByProvider). Only a call the provider's own
// webhook created is ended, and a call stored with an account only for
// that account (allocator.ErrOtherAccount otherwise).
// allocator.ErrCallNotFound: no live call of that provider (unknown,
// already ended, a duplicate callback).
func (s *Service) EndByProvider(ctx context.Context, callID, provider, account, event string) (allocator.ProviderEnd, error) {
	if allocator.ValidateID("call_sid", callID) == nil {
		NoteCallID(ctx, callID)
	}
	end, err := s.alloc.EndByProvider(ctx, callID, "provider:"+provider, account, event)
	if err != nil {
		return end, err
	}
	switch {
	case end.SocketOpen:
		s.log.Info("call ended by its provider; its media socket ends it", "call_sid", callID, "provider", provider, "event", event)
		return end, nil
	case end.Unwaited:
		s.log.Info("call ended by its provider while it waited for capacity", "call_sid", callID, "provider", provider, "event", event)
		return end, nil
	}
	rel := end.Released
	s.log.Info("call released", "call_sid", callID, "merchant_id", rel.MerchantID, "provider", provider, "pod", rel.PodName,
		"by", "provider", "event", event, "returned_to_pool", rel.ReleasedToPool, "was_draining", rel.WasDraining, "stale", rel.Stale)
	return end, nil
}
