package api

import (
	"fmt"
	"net/http"

	"github.com/edge-voice/edge/allocator"
)

// The admin API's operator routes beyond the predecessor's: every pod with
// its state, the end of a drain, and the running configuration.

// pods is GET /api/v1/pods: every registered pod, by name, with its state
// (available, allocated, draining, ejected, unready), tier and live calls.
func (h *Handlers) pods(w http.ResponseWriter, r *http.Request) {
	pods, err := h.Pools.Pods(r.Context())
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	out := make([]podRow, 0, len(pods))
	for _, p := range pods {
		calls := p.LiveCalls()
		if calls == nil {
			calls = []string{}
		}
		out = append(out, podRow{Name: p.Name, Tier: p.Tier, State: p.State, Address: p.Address,
			Calls: calls, Draining: p.Draining, Unready: p.Unready, Ejection: p.Ejection})
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "pods": out})
}

// undrain is POST /api/v1/undrain {"pod_name"}: the pod takes new calls
// again (an idle one at once; a busy exclusive one when its call ends).
func (h *Handlers) undrain(w http.ResponseWriter, r *http.Request) {
	var body struct {
		PodName string `json:"pod_name"`
	}
	if err := h.decode(w, r, &body); err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	u, err := h.Pools.Undrain(r.Context(), body.PodName)
	if err != nil {
		writeError(w, r, h.Log, err)
		return
	}
	var msg string
	switch {
	case !u.WasDraining:
		msg = fmt.Sprintf("Pod %s was not draining; nothing changed.", u.PodName)
	case u.BackInPool:
		msg = fmt.Sprintf("Pod %s takes calls again.", u.PodName)
	default:
		msg = fmt.Sprintf("Pod %s is no longer draining; it takes calls again once its call ends or the pod source reports it ready.", u.PodName)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"success": true, "pod_name": u.PodName, "tier": u.Tier,
		"was_draining": u.WasDraining, "back_in_pool": u.BackInPool, "message": msg,
	})
}

// runningConfig is GET /api/v1/config: the configuration this replica
// runs with (the file, environment and flags as loaded, with the reloads
// it applied), secrets hidden, key by key in the file's order. The tiers
// are Redis's (GET /api/v1/config/tiers); this shows what the file
// bootstrapped.
func (s *Surface) runningConfig(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "config": s.RunningConfig()})
}

// podRow is one pod of GET /api/v1/pods: its live calls under one name
// whatever its kind (GET /api/v1/pod/{pod_name} has the whole record).
type podRow struct {
	Name     string                 `json:"pod_name"`
	Tier     string                 `json:"tier"`
	State    string                 `json:"state"`
	Address  string                 `json:"address,omitempty"`
	Calls    []string               `json:"calls"`
	Draining bool                   `json:"is_draining"`
	Unready  bool                   `json:"unready"`
	Ejection *allocator.PodEjection `json:"ejection,omitempty"`
}
