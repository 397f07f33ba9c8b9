package api

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startAllocate starts the generic allocate's span, the root of the
// call's trace as a provider webhook's is (a caller's traceparent is not
// followed: the public listener faces the internet). end records the
// outcome; both are no-ops when Handlers.Tracer is nil.
func (h *Handlers) startAllocate(ctx context.Context) (context.Context, func(callID string, err error)) {
	if h.Tracer == nil {
		return ctx, func(string, error) {}
	}
	ctx, span := h.Tracer.Tracer("github.com/edge-voice/edge/api").Start(ctx, "allocate",
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer))
	return ctx, func(callID string, err error) {
		if callID != "" {
			span.SetAttributes(attribute.String("call_sid", callID))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
