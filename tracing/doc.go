// Package tracing owns edge's OpenTelemetry traces: whether they are on
// (the standard OTEL_* environment variables, off when none names an
// exporter), the OTLP/HTTP exporter and batch processor when they are, and
// the W3C trace context helpers the call path shares.
//
// Off, every component gets the no-op provider: no exporter, no goroutine,
// no allocation per span. The components take a trace.TracerProvider (or a
// Tracer) as an option and never read otel's globals, so tests can give
// each one an in-memory recorder.
package tracing
