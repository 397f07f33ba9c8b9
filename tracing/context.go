package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// TraceParent is the W3C traceparent of ctx's span, "" when ctx carries no
// sampled span (tracing off, or the call not sampled): then nothing is
// stored with the call and nothing is linked.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// ChildrenOnly wraps tp so that spans are made only inside another span:
// Redis commands of the call path (a webhook's allocate) become children of
// their request, while the background loops (lease renewal, sweeps, leader
// election), which run every few seconds, do not start a trace each.
func ChildrenOnly(tp trace.TracerProvider) trace.TracerProvider {
	return childrenOnly{tp: tp}
}

type childrenOnly struct {
	embedded.TracerProvider
	tp trace.TracerProvider
}

func (c childrenOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{t: c.tp.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// The no-op span keeps ctx's (absent) span: nothing recorded.
		return ctx, trace.SpanFromContext(ctx)
	}
	return c.t.Start(ctx, name, opts...)
}
