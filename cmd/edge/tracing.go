package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/edge-voice/edge/tracing"
)

// edgeTracing is tracing as main wires it: the provider each component is
// given is nil when tracing is off, so that none of them does any work for
// it (no span, no stats handler, no Redis hook).
type edgeTracing struct {
	*tracing.Tracing
}

// newTracing reads the OTEL_* variables of environ (package tracing).
func newTracing(ctx context.Context, environ []string, log *slog.Logger) (edgeTracing, error) {
	getenv := func(k string) string {
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	t, err := tracing.Setup(ctx, getenv, version)
	if err != nil {
		return edgeTracing{}, err
	}
	if t.Enabled {
		// Export failures are logged, not lost (otel's default handler
		// writes to the standard logger).
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
		log.Info("tracing on: spans exported with OTLP/HTTP", "endpoint", t.Endpoint)
	}
	return edgeTracing{t}, nil
}

// provider is the TracerProvider components take, nil when tracing is off.
func (t edgeTracing) provider() trace.TracerProvider {
	if !t.Enabled {
		return nil
	}
	return t.Provider
}

// tracer is the proxy's tracer, nil when tracing is off.
func (t edgeTracing) tracer(name string) trace.Tracer {
	if !t.Enabled {
		return nil
	}
	return t.Provider.Tracer(name)
}

// instrument adds go-redis' tracing hook to the client (the real one and
// the embedded one alike): each script a call's request runs is a child
// span of it. Background loops (renewals, sweeps, election) run outside
// any span and make none (tracing.ChildrenOnly). Statements are not
// recorded: scripts' arguments carry call ids and claims, and their bodies
// are long.
func (t edgeTracing) instrument(rdb redis.UniversalClient) error {
	if !t.Enabled {
		return nil
	}
	// No caller attributes: they name the file and line of the build
	// (code.filepath), which says nothing to an operator.
	return redisotel.InstrumentTracing(rdb,
		redisotel.WithTracerProvider(tracing.ChildrenOnly(t.Provider)), redisotel.WithDBStatement(false),
		redisotel.WithCallerEnabled(false))
}

// scripts is the TracerProvider of the allocator's script spans ("redis
// allocate", parent of the client's "evalsha"), nil when tracing is off.
func (t edgeTracing) scripts() trace.TracerProvider {
	if !t.Enabled {
		return nil
	}
	return tracing.ChildrenOnly(t.Provider)
}

// flush sends the spans still batched at exit, within a few seconds.
func (t edgeTracing) flush(log *slog.Logger) {
	if t.Tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("tracing: flushing spans at exit failed", "err", err)
	}
}
