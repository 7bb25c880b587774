package serve

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Each gRPC call is a server span named for its method, with OTel's RPC
// attributes and its status; a caller's mistake (a model that does not
// exist) is not the server's error, and a health check is a call too.
func TestGRPCSpansFollowRPCConventions(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithTracerProvider(tp))

	if _, err := r.grpc.ModelInfer(t.Context(), grpcInferRequest(rows(0, 1))); err != nil {
		t.Fatal(err)
	}
	missing := grpcInferRequest(rows(0, 1))
	missing.ModelName = "no-such-model"
	if _, err := r.grpc.ModelInfer(t.Context(), missing); err == nil {
		t.Fatal("a missing model answered")
	}
	if _, err := healthpb.NewHealthClient(r.conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	tp.ForceFlush(context.Background())

	type got struct {
		name, method, status string
		code                 codes.Code
	}
	var calls []got
	for _, s := range spans.GetSpans().Snapshots() {
		if s.SpanKind() != trace.SpanKindServer {
			continue
		}
		attrs := attribute.NewSet(s.Attributes()...)
		system, _ := attrs.Value("rpc.system.name")
		method, _ := attrs.Value("rpc.method")
		status, _ := attrs.Value("rpc.response.status_code")
		if system.AsString() != "grpc" {
			t.Errorf("span %q: rpc.system.name %q", s.Name(), system.AsString())
		}
		calls = append(calls, got{s.Name(), method.AsString(), status.AsString(), s.Status().Code})
	}
	const infer = "inference.GRPCInferenceService/ModelInfer"
	want := []got{{infer, infer, "OK", codes.Unset}, {infer, infer, "NOT_FOUND", codes.Unset},
		{"grpc.health.v1.Health/Check", "grpc.health.v1.Health/Check", "OK", codes.Unset}}
	if len(calls) != len(want) {
		t.Fatalf("server spans %+v, want %+v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("span %d: %+v, want %+v", i, calls[i], want[i])
		}
	}
}
