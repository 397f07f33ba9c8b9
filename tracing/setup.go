package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing is the provider every component is given.
type Tracing struct {
	// Provider is the SDK's when tracing is on, the no-op one when off.
	Provider trace.TracerProvider
	// Enabled: spans are exported. Components use it to skip work that
	// only feeds spans (the plugin RPC's stats handler).
	Enabled bool
	// Endpoint is where spans go, for the start-up log ("" when off).
	Endpoint string

	shutdown func(context.Context) error
}

// Shutdown flushes the spans still batched and stops the exporter; a no-op
// when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Off is tracing switched off.
func Off() *Tracing { return &Tracing{Provider: noop.NewTracerProvider()} }

// Setup reads the OTEL_* variables through getenv. Tracing is on when
// OTEL_TRACES_EXPORTER is "otlp", or unset while an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set; OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none switch it off.
// The specification's default exporter is otlp even with nothing set: edge
// departs from it so that an unconfigured edge sends nothing anywhere.
//
// The exporter is OTLP over HTTP (protobuf, the specification's default
// protocol); the SDK and the exporter read the rest of the standard
// variables themselves (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER and _ARG, OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _CERTIFICATE, _COMPRESSION and their _TRACES_ forms).
func Setup(ctx context.Context, getenv func(string) string, version string) (*Tracing, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Off(), nil
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return Off(), nil
	case "":
		if endpoint == "" {
			return Off(), nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: edge exports traces with otlp only (or none)", exp)
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: edge's exporter speaks http/protobuf only", proto)
	}
	// The exporter reads the endpoint and the rest from the environment
	// itself (the process's, which getenv is in production).
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName("edge"), semconv.ServiceVersion(version)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over edge's name.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, merr := resource.Merge(res, env); merr == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	if endpoint == "" {
		endpoint = "(the exporter's default)"
	}
	return &Tracing{
		Provider: tp, Enabled: true, Endpoint: endpoint,
		shutdown: func(ctx context.Context) error { return errors.Join(tp.Shutdown(ctx)) },
	}, nil
}
