package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/edge-voice/edge/calls"
)

// LogLevel serves the process log level at run time (admin listener):
// GET answers it, PUT {"level":"debug"} changes it at once, without a
// restart. An edit of log.level in the config file sets it again.
type LogLevel struct {
	Var *slog.LevelVar
	Log *slog.Logger
}

func (l *LogLevel) get(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "level": strings.ToLower(l.Var.Level().String())})
}

func (l *LogLevel) set(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Level string `json:"level"`
	}
	if err := DecodeJSON(http.MaxBytesReader(w, r.Body, 1<<10), &body); err != nil {
		writeError(w, r, l.Log, err)
		return
	}
	level, ok := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[strings.ToLower(strings.TrimSpace(body.Level))]
	if !ok {
		writeError(w, r, l.Log, fmt.Errorf("%w: level must be debug, info, warn or error", calls.ErrBadRequest))
		return
	}
	before := l.Var.Level()
	l.Var.Set(level)
	// Logged at the higher of the two levels, so that it is seen either way.
	l.Log.Log(r.Context(), max(before, level, slog.LevelInfo), "log level changed", "from", before.String(), "to", level.String())
	l.get(w, r)
}
