package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/edge-voice/edge/allocator"
)

// Errors of the HTTP layer itself.
var (
	ErrBodyTooLarge = errors.New("request body too large")
	ErrBadRequest   = errors.New("bad request")
	ErrUnauthorized = errors.New("unauthorized")
	ErrShuttingDown = errors.New("shutting down")
)

// Failure is how an error is answered: status, a stable code for machines,
// and a message safe to show the client (the cause goes to the log only).
type Failure struct {
	Status  int
	Code    string
	Message string
}

// FailureOf maps an error to its answer. It is the one place where errors
// become HTTP statuses; provider plugins get the same mapping through it.
func FailureOf(err error) Failure {
	var nc *allocator.NoCapacityError
	switch {
	case errors.As(err, &nc):
		msg := "no pods available"
		switch nc.Reason {
		case allocator.ReasonAllDraining:
			msg = "all pods are draining"
		case allocator.ReasonAtCapacity:
			msg = "all pods are busy"
		}
		return Failure{http.StatusServiceUnavailable, string(nc.Reason), msg}
	case errors.Is(err, ErrBodyTooLarge):
		return Failure{http.StatusRequestEntityTooLarge, "body_too_large", err.Error()}
	case errors.Is(err, allocator.ErrInvalidID), errors.Is(err, ErrBadRequest), errors.Is(err, allocator.ErrInvalidConfig):
		return Failure{http.StatusBadRequest, "invalid_request", err.Error()}
	case errors.Is(err, allocator.ErrCallNotFound):
		return Failure{http.StatusNotFound, "call_not_found", "call not found"}
	case errors.Is(err, allocator.ErrPodNotFound):
		return Failure{http.StatusNotFound, "pod_not_found", "pod not found"}
	case errors.Is(err, allocator.ErrPodBusy):
		return Failure{http.StatusConflict, "pod_busy", err.Error()}
	case errors.Is(err, ErrUnauthorized):
		return Failure{http.StatusUnauthorized, "unauthorized", "unauthorized"}
	case errors.Is(err, ErrShuttingDown):
		return Failure{http.StatusServiceUnavailable, "shutting_down", "shutting down"}
	case errors.Is(err, allocator.ErrUnavailable):
		return Failure{http.StatusServiceUnavailable, "redis_unavailable", "pool state unavailable, retry"}
	case errors.Is(err, context.DeadlineExceeded):
		return Failure{http.StatusServiceUnavailable, "timeout", "backend timeout"}
	default:
		return Failure{http.StatusInternalServerError, "internal", "internal error"}
	}
}

// writeError answers err as JSON {success:false, error, code} and logs the
// cause of server-side failures.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	f := FailureOf(err)
	if f.Status >= 500 {
		log.LogAttrs(r.Context(), slog.LevelWarn, "request failed",
			slog.String("path", r.URL.Path), slog.Int("status", f.Status), slog.String("code", f.Code), slog.Any("err", err))
	}
	writeJSON(w, f.Status, map[string]any{"success": false, "error": f.Message, "code": f.Code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
