package allocator

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TraceScripts makes every script run a client span named after the
// script ("redis allocate"), with db.system and the script's name: the
// Redis client's own span for it would be a bare "evalsha". tp is taken
// as given (edge passes one that only makes children of a traced
// request); nil turns the spans off. Call it before the allocator serves.
func (a *Allocator) TraceScripts(tp trace.TracerProvider) {
	if tp == nil {
		a.tracer = nil
		return
	}
	a.tracer = tp.Tracer("github.com/edge-voice/edge/allocator")
}

// startScript starts the span of one script run; end records err.
func (a *Allocator) startScript(ctx context.Context, name string) (context.Context, func(error)) {
	if a.tracer == nil {
		return ctx, func(error) {}
	}
	ctx, span := a.tracer.Start(ctx, "redis "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system", "redis"), attribute.String("db.operation", "EVALSHA"),
			attribute.String("edge.script", name)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
