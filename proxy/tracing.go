package proxy

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing of media sockets. A socket is one span, from
// its admission to its end, linked to the webhook that allocated its call
// (the webhook's traceparent comes back from the claim's round trip); each
// pod dial is a child span, each failover move an event. Nothing is traced
// per message: the relay loops never see the span.

// A client's own trace headers never reach a pod (podHeader forwards
// none): a stranger must not place the voice agent's spans in a trace of
// its choosing. Edge writes its own traceparent (the socket's span) when
// tracing is on.

// startSocketSpan starts the socket's span, linked to the webhook's
// trace; ctx then carries it for the dials. A nil span when tracing is off.
func (p *Proxy) startSocketSpan(ctx context.Context, callID, pod, webhook string) (context.Context, trace.Span) {
	if p.tracer == nil {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("call_sid", callID), attribute.String("pod", pod)),
	}
	if webhook != "" {
		wctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": webhook})
		if sc := trace.SpanContextFromContext(wctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{
				SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("edge.link", "webhook")},
			}))
		}
	}
	ctx, span := p.tracer.Start(ctx, "media socket", opts...)
	return context.WithValue(ctx, socketSpanKey{}, span.SpanContext()), span
}

// socketSpanKey holds the socket span's context under its dials: the pod
// is handed the socket's span as parent (the call's media lives as long as
// it does), not the dial's, which ends at the upgrade.
type socketSpanKey struct{}

// startDialSpan is one dial of a pod, a child of the socket's span.
func (p *Proxy) startDialSpan(ctx context.Context, pod string, attempt int) (context.Context, trace.Span) {
	if p.tracer == nil {
		return ctx, nil
	}
	return p.tracer.Start(ctx, "dial pod", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("pod", pod), attribute.Int("attempt", attempt)))
}

// endDialSpan records a dial's outcome ("connected" or dialReason's).
func endDialSpan(span trace.Span, addr string, err error) {
	if span == nil {
		return
	}
	outcome := "connected"
	if err != nil {
		outcome = dialReason(err)
		span.SetStatus(codes.Error, outcome)
	}
	span.SetAttributes(attribute.String("outcome", outcome), attribute.String("address", addr))
	span.End()
}

// moveEvent notes a failover move on the socket's span.
func moveEvent(ctx context.Context, from, to, reason string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("call moved", trace.WithAttributes(
		attribute.String("from", from), attribute.String("to", to), attribute.String("reason", reason)))
}

// endRefusedSpan ends the span of a socket refused after admission began.
func endRefusedSpan(span trace.Span, pod, reason string) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("pod", pod), attribute.String("outcome", reason))
	span.SetStatus(codes.Error, reason)
	span.End()
}

// endSocketSpan ends a relayed socket's span with how it ended.
func endSocketSpan(s *socket, initiator, code string, bytesIn, bytesOut int64) {
	if s.span == nil {
		return
	}
	s.span.SetAttributes(attribute.String("pod", s.podName()), attribute.String("closed_by", initiator),
		attribute.String("close_code", code), attribute.Int64("bytes_client_to_pod", bytesIn),
		attribute.Int64("bytes_pod_to_client", bytesOut), attribute.String("outcome", "relayed"))
	s.span.End()
}

// traceParent is the upgrade request's traceparent value: the
// socket's span, so that the voice agent's spans join the call's trace. ""
// when tracing is off.
func traceParent(ctx context.Context) string {
	sc, _ := ctx.Value(socketSpanKey{}).(trace.SpanContext)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.HeaderCarrier(http.Header{})
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(ctx, sc), c)
	return http.Header(c).Get("Traceparent")
}
