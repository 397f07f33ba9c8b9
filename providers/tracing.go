package providers

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/edge-voice/edge/tracing"
)

// tracerName names the spans this package makes.
const tracerName = "github.com/edge-voice/edge/providers"

// dialOptions carry the webhook's trace context to the plugin: otelgrpc's
// client stats handler makes each RPC a child span of the webhook and puts
// its traceparent in the gRPC metadata (a plugin may continue the trace or
// ignore it). None when tracing is off: no handler runs per RPC.
func (h *Host) dialOptions() []grpc.DialOption {
	if h.opts.Tracer == nil {
		return nil
	}
	// Only RPCs of a webhook: the supervisor's health checks every few
	// seconds must not start a trace each.
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tracing.ChildrenOnly(h.opts.Tracer)),
		otelgrpc.WithPropagators(propagation.TraceContext{}),
	))}
}

// startWebhook starts the webhook's span, the root of the call's trace. A
// traceparent the caller sent is not followed: the webhook comes from the
// internet, and a stranger must not place edge's spans in a trace of its
// choosing. nil tracer (tracing off): r and a nil end, nothing allocated.
func (h *Host) startWebhook(r *http.Request, provider, route string) (*http.Request, func(outcome string)) {
	if h.opts.Tracer == nil {
		return r, nil
	}
	ctx, span := h.opts.Tracer.Tracer(tracerName).Start(r.Context(), "webhook "+provider,
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("edge.provider", provider), attribute.String("edge.route", route)))
	return r.WithContext(ctx), func(outcome string) {
		span.SetAttributes(attribute.String("edge.outcome", outcome))
		switch outcome {
		case "plugin_error", "unavailable", "internal":
			span.SetStatus(codes.Error, outcome)
		}
		span.End()
	}
}

// annotateCall names the call on the webhook's span once the plugin has
// parsed it (a no-op span when tracing is off).
func annotateCall(ctx context.Context, callID, merchantID string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("call_sid", callID), attribute.String("merchant_id", merchantID))
}
