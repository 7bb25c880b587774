package serve

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	grpcmd "google.golang.org/grpc/metadata"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// Under concurrent requests over REST and gRPC, every request span
// links to the batch spans that served it and every batch span links to
// exactly the requests it served, both ways, with its rows; a client's
// traceparent is its request span's parent, on both protocols; a
// malformed one starts a new trace and refuses nothing.
func TestRequestAndBatchSpansLinkBothWays(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithTracerProvider(tp))

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const callers = 24
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			header := []string{}
			if i == 0 {
				header = []string{"traceparent", parent}
			}
			if i == 1 {
				header = []string{"traceparent", "00-not-a-trace-01"}
			}
			if st, b := r.do(t, http.MethodPost, "/v2/models/mlp/infer", inferBody(rows(i, 1+i%3), false, nil), nil, header...); st != http.StatusOK {
				t.Errorf("caller %d: %d %s", i, st, b)
			}
		})
	}
	wg.Go(func() {
		ctx := grpcmd.AppendToOutgoingContext(context.Background(), "traceparent", parent)
		if _, err := r.grpc.ModelInfer(ctx, grpcInferRequest(rows(100, 2))); err != nil {
			t.Errorf("gRPC: %v", err)
		}
	})
	wg.Wait()
	tp.ForceFlush(context.Background())

	requests, batches := map[trace.SpanID]sdktrace.ReadOnlySpan{}, map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans.GetSpans().Snapshots() {
		switch {
		case s.Name() == "batch mlp":
			batches[s.SpanContext().SpanID()] = s
		case s.SpanKind() == trace.SpanKindServer:
			requests[s.SpanContext().SpanID()] = s
		}
	}
	if len(requests) != callers+1 {
		t.Fatalf("%d request spans, want %d", len(requests), callers+1)
	}
	served := map[trace.SpanID]map[trace.SpanID]bool{} // request → batches
	var batchRows int64
	for id, b := range batches {
		for _, l := range b.Links() {
			req, ok := requests[l.SpanContext.SpanID()]
			if !ok {
				continue // the warm-up's, or another test's
			}
			if served[req.SpanContext().SpanID()] == nil {
				served[req.SpanContext().SpanID()] = map[trace.SpanID]bool{}
			}
			served[req.SpanContext().SpanID()][id] = true
		}
		for _, a := range b.Attributes() {
			if a.Key == "drainpipe.batch.rows" && len(b.Links()) > 0 {
				batchRows += a.Value.AsInt64()
			}
		}
	}
	var wantRows int64 = 2
	for i := range callers {
		wantRows += int64(1 + i%3)
	}
	if batchRows != wantRows {
		t.Errorf("the batch spans hold %d rows, the requests sent %d", batchRows, wantRows)
	}
	parents := 0
	for id, req := range requests {
		back := map[trace.SpanID]bool{}
		for _, l := range req.Links() {
			back[l.SpanContext.SpanID()] = true
		}
		if len(served[id]) == 0 || fmt.Sprint(back) != fmt.Sprint(served[id]) {
			t.Errorf("request span %s (%s): links to batches %v, linked from %v", id, req.Name(), back, served[id])
		}
		if req.Parent().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" && req.Parent().SpanID().String() == "00f067aa0ba902b7" {
			parents++
		}
	}
	if parents != 2 {
		t.Errorf("%d request spans continue the client's traceparent, want 2 (REST and gRPC)", parents)
	}
}

// grpcInferRequest is a ModelInfer request of rs on the mlp model.
func grpcInferRequest(rs [][]float32) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{
		Name: "features", Datatype: "FP32", Shape: []int64{int64(len(rs)), int64(len(rs[0]))},
		Contents: &pb.InferTensorContents{Fp32Contents: flat(rs)},
	}}}
}
