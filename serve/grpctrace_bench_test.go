package serve

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// What tracing a gRPC request costs the server, against the least the
// SDK can do: a span started and ended, batched to an exporter that
// drops it (sdk-floor). "handler" is the request's own span (grpcSpans);
// "request/batch-of-N" adds its share of the span of a batch serving N
// requests, linked both ways. `go run ./bench --goals` reads the ratio.
func BenchmarkGRPCSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	h := grpcSpans{tracer: tp.Tracer("bench"), names: map[string]string{}}
	h.register(map[string]grpc.ServiceInfo{pb.GRPCInferenceService_ServiceDesc.ServiceName: {Methods: []grpc.MethodInfo{{Name: "ModelInfer"}}}})
	info := &stats.RPCTagInfo{FullMethodName: "/inference.GRPCInferenceService/ModelInfer"}
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx := h.TagRPC(context.Background(), info)
			h.HandleRPC(ctx, &stats.End{})
		}
	})
	batches := &tracingObserver{tracer: tp.Tracer("bench"), model: "m", version: "1"}
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("request/batch-of-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			reqs := make([]context.Context, n)
			for i := 0; b.Loop(); i++ {
				reqs[i%n] = h.TagRPC(context.Background(), info)
				if i%n == n-1 {
					_, end := batches.StartBatch(context.Background(), i/n, n, n, reqs, time.Millisecond)
					end(time.Millisecond, nil)
					for _, ctx := range reqs {
						h.HandleRPC(ctx, &stats.End{})
					}
				}
			}
		})
	}
	b.Run("sdk-floor", func(b *testing.B) {
		b.ReportAllocs()
		tr := tp.Tracer("bench")
		for b.Loop() {
			_, span := tr.Start(context.Background(), "x", trace.WithSpanKind(trace.SpanKindServer))
			span.End()
		}
	})
}
