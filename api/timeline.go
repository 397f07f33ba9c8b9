package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/edge-voice/edge/allocator"
	"github.com/edge-voice/edge/calls"
)

// CallRecords is what the call timeline reads (allocator.Allocator).
type CallRecords interface {
	Timeline(ctx context.Context, callID string) (allocator.CallTimeline, error)
	PodCalls(ctx context.Context, pod string) ([]string, error)
}

// callTimeline is GET /api/v1/calls/{call_sid}: what Redis keeps
// of a call, live or ended (for the call info TTL). An unknown call is a
// bare 404; the record holds no token and no media claim identity.
func (h *Handlers) callTimeline(w http.ResponseWriter, r *http.Request) {
	tl, err := h.Records.Timeline(r.Context(), r.PathValue("call_sid"))
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "call": tl})
}

// podCalls is GET /api/v1/calls?pod=<name>: a pod's live calls.
func (h *Handlers) podCalls(w http.ResponseWriter, r *http.Request) {
	pod := r.URL.Query().Get("pod")
	if pod == "" {
		writeError(w, r, h.Log, fmt.Errorf("%w: the pod query parameter is required", calls.ErrBadRequest))
		return
	}
	ids, err := h.Records.PodCalls(r.Context(), pod)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "pod_name": pod, "calls": ids})
}
