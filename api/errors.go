package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/edge-voice/edge/calls"
)

// writeError answers err as JSON {success:false, error, code}, mapped by
// calls.FailureOf (the one mapping for every face), and logs the cause of
// server-side failures.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	writeErrorWith(w, r, log, err)
}

// writeErrorWith is writeError with more fields in the answer, as
// field/value pairs.
func writeErrorWith(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, fields ...any) {
	f := calls.FailureOf(err)
	// Refused allocations are logged by calls.Service, aggregated.
	if f.Status >= 500 && f.Kind != calls.KindNoCapacity {
		log.LogAttrs(r.Context(), slog.LevelWarn, "request failed",
			slog.String("path", r.URL.Path), slog.Int("status", f.Status), slog.String("code", f.Code), slog.Any("err", err))
	}
	if s := calls.RetryAfter(err); s > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	body := map[string]any{"success": false, "error": f.Message, "code": f.Code}
	for i := 0; i+1 < len(fields); i += 2 {
		if k, ok := fields[i].(string); ok {
			body[k] = fields[i+1]
		}
	}
	writeJSON(w, f.Status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
