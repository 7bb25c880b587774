package serve

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/stats"
)

// What a traced gRPC call costs the server, against the least the SDK
// can do: a span started and ended, batched to an exporter that drops it.
// The difference is what grpcSpans adds; the floor is the SDK's.
func BenchmarkGRPCSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	h := grpcSpans{tracer: tp.Tracer("bench")}
	info := &stats.RPCTagInfo{FullMethodName: "/inference.GRPCInferenceService/ModelInfer"}
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx := h.TagRPC(context.Background(), info)
			h.HandleRPC(ctx, &stats.End{})
		}
	})
	b.Run("sdk-floor", func(b *testing.B) {
		b.ReportAllocs()
		tr := tp.Tracer("bench")
		for b.Loop() {
			_, span := tr.Start(context.Background(), "x", trace.WithSpanKind(trace.SpanKindServer))
			span.End()
		}
	})
}
