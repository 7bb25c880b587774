package serve

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Each inference call is a server span named for its method, with OTel's
// RPC attributes and its status; a caller's mistake (a model that does
// not exist) is not the server's error; a health check is a probe, and a
// method no service has a made-up name: neither is traced.
func TestGRPCSpansFollowRPCConventions(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	// A call's span ends at gRPC's End event, which may come after its
	// client has the answer: the test waits for the three ends.
	ended := &serverEnds{want: 2, done: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSpanProcessor(ended))
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
	if err := callGRPC(t.Context(), r.conn, "/made.Up/Method"); status.Code(err) != grpccodes.Unimplemented {
		t.Fatalf("a made-up method: %v", err)
	}
	select {
	case <-ended.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the server spans did not end in 30 s")
	}

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
	want := []got{{infer, infer, "OK", codes.Unset}, {infer, infer, "NOT_FOUND", codes.Unset}}
	// In the order they ended, which is not always the order sent.
	slices.SortFunc(calls, func(a, b got) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.status, b.status))
	})
	slices.SortFunc(want, func(a, b got) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.status, b.status))
	})
	if len(calls) != len(want) {
		t.Fatalf("server spans %+v, want %+v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("span %d: %+v, want %+v", i, calls[i], want[i])
		}
	}
}

// serverEnds closes done when want server spans have ended.
type serverEnds struct {
	mu   sync.Mutex
	want int
	done chan struct{}
}

func (e *serverEnds) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanKind() != trace.SpanKindServer {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.want--; e.want == 0 {
		close(e.done)
	}
}

func (*serverEnds) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (*serverEnds) Shutdown(context.Context) error                  { return nil }
func (*serverEnds) ForceFlush(context.Context) error                { return nil }
