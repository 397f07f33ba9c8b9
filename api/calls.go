package api

import (
	"context"
	"fmt"
	"strings"

	"github.com/edge-voice/edge/allocator"
)

// Allocator is what the API needs of the allocator.
type Allocator interface {
	Allocate(ctx context.Context, req allocator.Request) (allocator.Allocation, error)
	Release(ctx context.Context, callID string) (allocator.Released, error)
	Drain(ctx context.Context, pod string) (allocator.Drained, error)
	PodInfo(ctx context.Context, pod string) (allocator.PodInfo, error)
	Status(ctx context.Context) ([]allocator.PoolStatus, error)
}

// CallRequest is an allocation as any surface asks for it: the generic JSON
// endpoint or a provider plugin's parsed webhook.
type CallRequest struct {
	CallID     string
	MerchantID string
	Provider   string // default "twilio"
	Flow       string // default "v2"; "v2" appends /v2 to the media path
	Template   string // default "order-confirmation" ("template" for exotel)
}

// CallResult is an allocation with the media WebSocket URL the provider
// must open.
type CallResult struct {
	allocator.Allocation
	WSURL string
}

// Calls allocates pods for calls and names their media URLs.
type Calls struct {
	Alloc Allocator
	// BaseURL returns the public base URL media URLs start with
	// (ws://... or wss://..., no trailing slash). Read on every call so that
	// a config reload applies at once.
	BaseURL func() string
	// MediaSegment returns the per-call path segment that binds a media
	// socket to its call (e.g. a signed token), inserted after
	// /ws/pod/<pod>; nil or "" adds nothing, giving the seeds' exact URL.
	MediaSegment func(callID, pod string) string
}

// Defaults of the predecessor's media URL.
const (
	DefaultProvider       = "twilio"
	DefaultFlow           = "v2"
	DefaultTemplate       = "order-confirmation"
	DefaultExotelTemplate = "template"
)

// Normalize fills the predecessor's defaults and validates every field that
// becomes part of a Redis key or the media URL path.
func (r *CallRequest) Normalize() error {
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

// Allocate gives the call a pod and builds its media URL. A repeat for the
// same call id answers the same pod and URL.
func (c *Calls) Allocate(ctx context.Context, req CallRequest) (CallResult, error) {
	if err := req.Normalize(); err != nil {
		return CallResult{}, err
	}
	al, err := c.Alloc.Allocate(ctx, allocator.Request{CallID: req.CallID, MerchantID: req.MerchantID})
	if err != nil {
		return CallResult{Allocation: al}, err
	}
	var segment string
	if c.MediaSegment != nil {
		segment = c.MediaSegment(al.CallID, al.PodName)
	}
	return CallResult{Allocation: al, WSURL: MediaURL(c.BaseURL(), al.PodName, segment, req)}, nil
}

// MediaURL builds the media WebSocket URL exactly as the predecessor did:
//
//	{base}/ws/pod/{pod}[/{segment}]/agent/voice/breeze-buddy/{provider}/callback/{template}[/v2]
//
// Every part was validated to [A-Za-z0-9_.-], so nothing needs escaping.
func MediaURL(base, pod, segment string, req CallRequest) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(base, "/"))
	b.WriteString("/ws/pod/")
	b.WriteString(pod)
	if segment != "" {
		b.WriteString("/")
		b.WriteString(segment)
	}
	fmt.Fprintf(&b, "/agent/voice/breeze-buddy/%s/callback/%s", req.Provider, req.Template)
	if req.Flow == "v2" {
		b.WriteString("/v2")
	}
	return b.String()
}
