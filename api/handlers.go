package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"

	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
)

// Calls is what the generic API needs of the call lifecycle (calls.Service).
type Calls interface {
	Allocate(ctx context.Context, req calls.Request) (calls.Call, error)
	Release(ctx context.Context, callID string) (allocator.Released, error)
}

// Pools is what the admin API reads and changes of the pools directly.
type Pools interface {
	Undrain(ctx context.Context, pod string) (allocator.Undrained, error)
	DrainInstance(ctx context.Context, pod string, ip netip.Addr) (allocator.Drained, error)
	PodInfo(ctx context.Context, pod string) (allocator.PodInfo, error)
	Pods(ctx context.Context) ([]allocator.PodInfo, error)
	Status(ctx context.Context) ([]allocator.PoolStatus, error)
	// Leader names the replica Redis last recorded as the leader.
	Leader(ctx context.Context) (string, error)
}

// Handlers serves the endpoints the predecessor had.
type Handlers struct {
	Calls Calls
	Pools Pools
	// Records serves the call timeline (GET /api/v1/calls/...); nil: not
	// served.
	Records CallRecords
	// Callers authenticates the generic allocate API; nil refuses every
	// caller.
	Callers *Callers
	Log     *slog.Logger
	// MaxBody returns the request body limit in bytes (nil:
	// DefaultConfig's http.max_body_bytes).
	MaxBody func() int64
	// IsLeader reports whether this replica runs the leader loops (status
	// only); nil means unknown.
	IsLeader func() bool
	// Tracer, when set, traces the generic allocate (tracing.go); nil:
	// tracing off.
	Tracer trace.TracerProvider
}

// allocateRequest is the generic allocation body. reseller_id is the name
// the predecessor's code reads; merchant_id the one its documents use.
type allocateRequest struct {
	CallSID    string `json:"call_sid"`
	MerchantID string `json:"merchant_id"`
	ResellerID string `json:"reseller_id"`
	Provider   string `json:"provider"`
	Flow       string `json:"flow"`
	Template   string `json:"template"`
}

type allocateResponse struct {
	Success     bool   `json:"success"`
	PodName     string `json:"pod_name"`
	WSURL       string `json:"ws_url"`
	SourcePool  string `json:"source_pool"`
	WasExisting bool   `json:"was_existing"`
}

func (h *Handlers) allocate(w http.ResponseWriter, r *http.Request) {
	who, err := h.Callers.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="edge"`)
		writeError(w, r, h.Log, err)
		return
	}
	h.allocateFor(w, r, who)
}

// internalAllocate is the generic allocate on the internal listener (see
// Surface.InternalSurface): a generic API token names its caller as on the
// public listener; any other request is the internal caller, with
// internal.token when one is set, checked behind th.
func (h *Handlers) internalAllocate(th *AuthThrottle, token func() string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, err := h.Callers.authenticate(r)
		if err != nil {
			if want := token(); want != "" {
				switch res, retry := th.check(r, "internal", func() bool { return bearerMatches(r.Header.Get("Authorization"), want) }); res {
				case authThrottled:
					refuseThrottled(w, retry)
					return
				case authFailed:
					w.Header().Set("WWW-Authenticate", `Bearer realm="edge"`)
					writeError(w, r, h.Log, err)
					return
				}
			}
			who = internalCaller
		}
		h.allocateFor(w, r, who)
	}
}

// internalCaller is who allocates on the internal listener without a
// generic API token: the predecessor's voice agents, for any merchant.
var internalCaller = caller{id: "internal", may: func(string) bool { return true }}

func (h *Handlers) allocateFor(w http.ResponseWriter, r *http.Request, who caller) {
	var body allocateRequest
	if err := h.decode(w, r, &body); err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	if body.MerchantID == "" {
		body.MerchantID = body.ResellerID
	}
	if !who.may(body.MerchantID) {
		writeError(w, r, h.Log, merchantRefused(body.MerchantID))
		return
	}
	ctx, end := h.startAllocate(r.Context())
	c, err := h.Calls.Allocate(ctx, calls.Request{
		CallID: body.CallSID, MerchantID: body.MerchantID,
		Provider: body.Provider, Flow: body.Flow, Template: body.Template,
		Creator: who.id,
	})
	end(c.ID, err) // c.ID: a validated id, "" on an error
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, allocateResponse{
		Success: true, PodName: c.Pod, WSURL: c.WSURL,
		SourcePool: c.SourcePool, WasExisting: c.WasExisting,
	})
}

func (h *Handlers) release(w http.ResponseWriter, r *http.Request) {
	var body struct {
		CallSID string `json:"call_sid"`
	}
	if err := h.decode(w, r, &body); err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	rel, err := h.Calls.Release(r.Context(), body.CallSID)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	// released_to_pool is the predecessor's: the pool the pod went back
	// to, "" when it did not (draining). edge's boolean sits beside it.
	resp := releaseResponse{
		Success: true, PodName: rel.PodName,
		ReturnedToPool: rel.ReleasedToPool, WasDraining: rel.WasDraining,
	}
	if rel.ReleasedToPool {
		resp.ReleasedToPool = rel.SourcePool
	}
	if rel.Stale {
		resp.Stale = true
		resp.Message = "the call's lease had expired and its pod was already recovered; nothing returned to the pool"
	}
	writeJSON(w, http.StatusOK, resp)
}

// releaseResponse is the release answer. Its fields are in the order of
// their names, so that it encodes to the bytes the map it replaced did
// (encoding/json sorts a map's keys). The struct saves 13 allocations and
// about 3.5 us of CPU per release (BenchmarkReleaseAnswer).
type releaseResponse struct {
	Message        string `json:"message,omitempty"`
	PodName        string `json:"pod_name"`
	ReleasedToPool string `json:"released_to_pool"`
	ReturnedToPool bool   `json:"returned_to_pool"`
	Stale          bool   `json:"stale,omitempty"`
	Success        bool   `json:"success"`
	WasDraining    bool   `json:"was_draining"`
}

func (h *Handlers) drain(w http.ResponseWriter, r *http.Request) {
	var body struct {
		PodName string `json:"pod_name"`
		// PodIP, when given, is the address of the instance the drain is
		// for (the caller's own, from the downward API): a pod replaced
		// under the same name is refused with 409 pod_replaced and left
		// as it is. The predecessor's agents send only pod_name.
		PodIP string `json:"pod_ip"`
	}
	if err := h.decode(w, r, &body); err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	var ip netip.Addr
	if body.PodIP != "" {
		var err error
		if ip, err = netip.ParseAddr(body.PodIP); err != nil {
			writeError(w, r, h.Log, fmt.Errorf("%w: pod_ip %q is not an IP address", calls.ErrBadRequest, body.PodIP))
			return
		}
	}
	d, err := h.Pools.DrainInstance(r.Context(), body.PodName, ip)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	msg := fmt.Sprintf("Pod %s is draining. No active call.", d.PodName)
	if d.HasActiveCall {
		msg = fmt.Sprintf("Pod %s is draining with active call in progress. Will complete when call ends.", d.PodName)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": true, "pod_name": d.PodName, "has_active_call": d.HasActiveCall,
		"was_draining": d.WasDraining, "message": msg,
	})
}

func (h *Handlers) status(w http.ResponseWriter, r *http.Request) {
	pools, err := h.Pools.Status(r.Context())
	if err != nil {
		// The pools could not be read: "down", and the HTTP status of the
		// cause (503 for Redis), for edge's own clients. The internal
		// listener answers the predecessor's way (predecessorStatus).
		writeErrorWith(w, r, h.Log, err, "status", "down")
		return
	}
	writeJSON(w, http.StatusOK, h.statusUp(pools))
}

// predecessorStatus is GET /api/v1/status where the predecessor's clients
// call it (the internal listener). The predecessor's status handler
// answers HTTP 200 on every path: with Redis down, its binary answered
// {"pools":{},"active_calls":0,"is_leader":false,"status":"down"}. So does
// this one, with edge's fields beside those four (success, code and error
// saying why, tiers repeating pools), as its "up" answer carries edge's
// fields beside the predecessor's: a client that reads the predecessor's
// fields reads its values and types, and a dashboard or script that took
// 200 for "answered" does not see an error where it saw "down".
func (h *Handlers) predecessorStatus(w http.ResponseWriter, r *http.Request) {
	pools, err := h.Pools.Status(r.Context())
	if err == nil {
		writeJSON(w, http.StatusOK, h.statusUp(pools))
		return
	}
	f := calls.FailureOf(err)
	h.Log.LogAttrs(r.Context(), slog.LevelWarn, "request failed",
		slog.String("path", r.URL.Path), slog.Int("status", http.StatusOK), slog.String("code", f.Code), slog.Any("err", err))
	writeJSON(w, http.StatusOK, map[string]any{
		"status": "down", "pools": map[string]any{}, "active_calls": 0, "is_leader": false,
		"tiers": map[string]any{}, "success": false, "code": f.Code, "error": f.Message,
	})
}

// statusUp is the status answer once the pools were read.
func (h *Handlers) statusUp(pools []allocator.PoolStatus) map[string]any {
	tiers := make(map[string]any, len(pools))
	total := 0
	for _, p := range pools {
		tiers[p.Tier] = p
		total += p.Calls
	}
	// "pools" and "status" ("up", or "down" above) are the predecessor's
	// shape; "tiers" (the same rows) is edge's name for them, kept for
	// edge's own clients.
	resp := map[string]any{"success": true, "status": "up", "pools": tiers, "tiers": tiers, "active_calls": total}
	if h.IsLeader != nil {
		resp["is_leader"] = h.IsLeader()
	}
	return resp
}

func (h *Handlers) podInfo(w http.ResponseWriter, r *http.Request) {
	info, err := h.Pools.PodInfo(r.Context(), r.PathValue("pod_name"))
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	// Flat fields as the predecessor answered them, edge's full record
	// beside them under "pod".
	lease := info.Lease
	if lease == "" && len(info.Calls) > 0 {
		lease = info.Calls[0]
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": true, "pod": info,
		"pod_name": info.Name, "tier": info.Tier, "status": info.Status, "is_draining": info.Draining,
		"has_active_lease": lease != "", "lease_call_sid": lease,
		"allocated_call_sid": info.CallID, "source_pool": info.Source,
	})
}

// decode reads a JSON body under the size limit, whatever its Content-Type
// (the predecessor did not look at it either). Unknown fields are
// accepted (callers of the predecessor send more than it read); a second
// value or trailing garbage is not.
func (h *Handlers) decode(w http.ResponseWriter, r *http.Request, v any) error {
	limit := DefaultConfig().HTTP.MaxBodyBytes
	if h.MaxBody != nil {
		limit = h.MaxBody()
	}
	return DecodeJSON(http.MaxBytesReader(w, r.Body, limit), v)
}

// DecodeJSON decodes exactly one JSON value from body, mapping an oversized
// body to calls.ErrBodyTooLarge and anything malformed to calls.ErrBadRequest.
func DecodeJSON(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON body")
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: limit is %d bytes", calls.ErrBodyTooLarge, tooLarge.Limit)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: empty body", calls.ErrBadRequest)
	case err != nil:
		return fmt.Errorf("%w: malformed JSON: %v", calls.ErrBadRequest, err)
	}
	return nil
}
