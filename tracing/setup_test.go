package tracing

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestSetupIsOffUnlessAnExporterIsNamed(t *testing.T) {
	tests := map[string]struct {
		env     map[string]string
		enabled bool
		err     string
	}{
		"nothing set":           {env: nil},
		"service name only":     {env: map[string]string{"OTEL_SERVICE_NAME": "edge"}},
		"endpoint":              {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, enabled: true},
		"traces endpoint":       {env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, enabled: true},
		"exporter otlp":         {env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, enabled: true},
		"exporter none":         {env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		"sdk disabled":          {env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}},
		"unsupported exporter":  {env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		"unsupported protocol":  {env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		"http/protobuf allowed": {env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, enabled: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr, err := Setup(context.Background(), func(k string) string { return tc.env[k] }, "test")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			if tr.Enabled != tc.enabled {
				t.Fatalf("enabled = %v, want %v", tr.Enabled, tc.enabled)
			}
			if !tc.enabled {
				// The no-op provider: its spans record nothing.
				_, span := tr.Provider.Tracer("t").Start(context.Background(), "x")
				if span.IsRecording() || span.SpanContext().IsValid() {
					t.Error("tracing off, yet a span records")
				}
			}
		})
	}
}

func TestChildrenOnlyAndTraceParent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := ChildrenOnly(tp).Tracer("redis")

	// A background loop's command: no span around it, none made.
	ctx, span := tracer.Start(context.Background(), "evalsha")
	span.End()
	if TraceParent(ctx) != "" || len(rec.Ended()) != 0 {
		t.Fatalf("a span was made outside any span: %v", rec.Ended())
	}
	// A request's command: a child of the request's span.
	rctx, req := tp.Tracer("http").Start(context.Background(), "webhook")
	_, child := tracer.Start(rctx, "evalsha")
	child.End()
	req.End()
	ended := rec.Ended()
	if len(ended) != 2 || ended[0].Parent().SpanID() != req.SpanContext().SpanID() {
		t.Fatalf("want the command as a child of the request, got %v", ended)
	}
	want := "00-" + req.SpanContext().TraceID().String() + "-" + req.SpanContext().SpanID().String() + "-01"
	if got := TraceParent(rctx); got != want {
		t.Errorf("TraceParent = %q, want %q", got, want)
	}
}
