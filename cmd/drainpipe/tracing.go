package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// tracerProvider returns the tracer provider OpenTelemetry's standard
// environment asks for, or nil: traces are on when OTEL_TRACES_EXPORTER
// is otlp, or an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and OTEL_SDK_DISABLED is not true.
// The exporter speaks OTLP over HTTP (http/protobuf, the default) or gRPC
// (OTEL_EXPORTER_OTLP_PROTOCOL, _TRACES_PROTOCOL) and reads its endpoint,
// headers and timeouts from the environment; the sampler is OTel's
// (OTEL_TRACES_SAMPLER, default parent-based always-on); the service is
// drainpipe unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say.
func tracerProvider(ctx context.Context) (*sdktrace.TracerProvider, error) {
	env := os.Getenv
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	kind := env("OTEL_TRACES_EXPORTER")
	if kind == "" && env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	switch kind {
	case "none":
		return nil, nil
	case "", "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: this command exports otlp, or none", kind)
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto := cmp.Or(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), env("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf"); proto {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "drainpipe")), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// traces returns tracerProvider's provider, or nil, and a function that
// stops it once its last spans are exported (within a bound).
func traces(ctx context.Context, logger *slog.Logger) (*sdktrace.TracerProvider, func(), error) {
	tp, err := tracerProvider(ctx)
	if err != nil || tp == nil {
		return nil, func() {}, err
	}
	return tp, func() {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(flush); err != nil {
			logger.Warn("traces: the last spans were not exported", "error", err)
		}
	}, nil
}
