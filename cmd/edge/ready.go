package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/edge-voice/edge/api"
)

// readyAnnouncer calls announce once readiness first passes: every check,
// the plugins' included, answered. It returns then, or when ctx ends.
type readyAnnouncer struct {
	ready    *api.Readiness
	log      *slog.Logger
	announce func()
}

// readyPoll is how often the announcer asks: the checks are cheap (a
// Redis ping, in-process states) and the line is only as late as this.
const readyPoll = 100 * time.Millisecond

func (a *readyAnnouncer) Run(ctx context.Context) error {
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		if !a.ready.Stopping() && len(a.ready.Check(ctx)) == 0 {
			a.announce()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
