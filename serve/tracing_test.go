package serve

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

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
	const callers = 24
	spans := tracetest.NewInMemoryExporter()
	ended := &serverEnds{want: callers + 1, done: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSpanProcessor(ended))
	defer tp.Shutdown(context.Background())
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithTracerProvider(tp))

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
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
	// A request span may end after its caller has the answer.
	select {
	case <-ended.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the request spans did not end in 30 s")
	}
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

// A sequence model's batch spans carry the tokens their windows ran:
// summed over the batches (the warm-up's marked and left out), the real tokens are the requests' and the
// tokens and token slots are /metrics' counters, and each span's shapes
// fill its slots.
func TestSequenceBatchSpansCountTokens(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	spec := textSpec(t, nil)
	r := serveTest(t, []ModelSpec{spec}, WithTracerProvider(tp))

	const callers = 40
	var sent atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			ids := make([]int64, 1+(i*7)%40)
			for k := range ids {
				ids[k] = int64(1 + (i+k)%900)
			}
			sent.Add(int64(len(ids)))
			body := map[string]any{"inputs": []map[string]any{{"name": "input_ids", "datatype": "INT64", "shape": []int{1, len(ids)}, "data": ids}}}
			if st, b := r.do(t, http.MethodPost, "/v2/models/enc/infer", body, nil); st != http.StatusOK {
				t.Errorf("caller %d: %d %s", i, st, b)
			}
		})
	}
	wg.Wait()
	tp.ForceFlush(context.Background())

	var tokens, slots, batches int64
	for _, s := range spans.GetSpans().Snapshots() {
		if s.Name() != "batch enc" {
			continue
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value
		}
		if attrs["drainpipe.batch.warm_up"].AsBool() {
			continue // left out of the metrics, as of the requests
		}
		batches++
		var filled int64
		for _, sh := range attrs["drainpipe.batch.shapes"].AsStringSlice() {
			var rows, toks int64
			if _, err := fmt.Sscanf(sh, "%d×%d", &rows, &toks); err != nil {
				t.Fatalf("shape %q: %v", sh, err)
			}
			filled += rows * toks
		}
		n, sl := attrs["drainpipe.batch.tokens"].AsInt64(), attrs["drainpipe.batch.token_slots"].AsInt64()
		if filled != sl || n > sl || n == 0 {
			t.Errorf("batch span: %d tokens in %d slots, shapes %v", n, sl, attrs["drainpipe.batch.shapes"].AsStringSlice())
		}
		if waste := attrs["drainpipe.batch.padding_waste"].AsFloat64(); math.Abs(waste-(1-float64(n)/float64(sl))) > 1e-12 {
			t.Errorf("batch span: padding waste %v for %d tokens in %d slots", waste, n, sl)
		}
		tokens, slots = tokens+n, slots+sl
	}
	if tokens != sent.Load() {
		t.Errorf("the batch spans ran %d tokens, the requests sent %d", tokens, sent.Load())
	}
	_, metrics := r.do(t, http.MethodGet, "/metrics", nil, nil)
	for name, want := range map[string]int64{"drainpipe_sequence_tokens_total": tokens, "drainpipe_sequence_token_slots_total": slots} {
		m := regexp.MustCompile(name + `\{model="enc",version="1"\} (\S+)`).FindSubmatch(metrics)
		if m == nil {
			t.Fatalf("no %s in /metrics:\n%s", name, metrics)
		}
		if got, _ := strconv.ParseFloat(string(m[1]), 64); int64(got) != want {
			t.Errorf("%s is %s, the batch spans sum to %d", name, m[1], want)
		}
	}
	t.Logf("%d batch spans: %d tokens in %d slots", batches, tokens, slots)
}

// A REST request's span is named after the route that took it, never the
// path sent: after requests to made-up paths with made-up methods, the
// names are the routes' own, wildcards and all (the catch-all's for the
// made-up paths, "HTTP" for a made-up method), as many as the routes
// however many paths were tried.
func TestRESTSpansNamedByRoute(t *testing.T) {
	const scans = 200
	spans := tracetest.NewInMemoryExporter()
	ended := &serverEnds{want: scans + 2, done: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSpanProcessor(ended))
	defer tp.Shutdown(context.Background())
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithTracerProvider(tp))

	if code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 1), false, nil), nil); code != 200 {
		t.Fatalf("infer: %d %s", code, body)
	}
	r.do(t, "GET", "/v2/models/mlp/versions/1", nil, nil)
	for i := range scans {
		method := "GET"
		if i%2 == 1 {
			method = fmt.Sprintf("SCAN%d", i)
		}
		r.do(t, method, fmt.Sprintf("/scan/%d/x", i), nil, nil)
	}
	select {
	case <-ended.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the request spans did not end in 30 s")
	}
	names := map[string]int{}
	for _, s := range spans.GetSpans().Snapshots() {
		if s.SpanKind() == trace.SpanKindServer {
			names[s.Name()]++
		}
	}
	want := map[string]int{"POST /v2/models/{name}/infer": 1, "GET /v2/models/{name}/versions/{version}": 1, "GET /": scans / 2, "HTTP /": scans / 2}
	if !maps.Equal(names, want) {
		t.Errorf("span names %v, want %v", names, want)
	}
}

// An embeddings request's span carries OpenTelemetry's GenAI attributes,
// equal to the usage and the embeddings the answer reports.
func TestEmbeddingsSpanGenAI(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	ended := &serverEnds{want: 1, done: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans), sdktrace.WithSpanProcessor(ended))
	defer tp.Shutdown(context.Background())
	r := serveTest(t, []ModelSpec{textSpec(t, nil)}, WithTracerProvider(tp))
	var answer struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	body := map[string]any{"model": "enc", "input": [][]int{{1, 2, 3}, {4, 5}}, "encoding_format": "base64", "dimensions": 3}
	if code, b := r.do(t, http.MethodPost, "/v1/embeddings", body, &answer); code != http.StatusOK || len(answer.Data) != 2 || answer.Usage.PromptTokens != 5 {
		t.Fatalf("%d %s", code, b)
	}
	select {
	case <-ended.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the request span did not end in 30 s")
	}
	var found bool
	for _, s := range spans.GetSpans().Snapshots() {
		if s.SpanKind() != trace.SpanKindServer {
			continue
		}
		found = true
		attrs := attribute.NewSet(s.Attributes()...)
		for key, want := range map[attribute.Key]string{"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "enc",
			"gen_ai.usage.input_tokens": "5", "gen_ai.embeddings.dimension.count": "3", "gen_ai.request.encoding_formats": `["base64"]`} {
			if v, ok := attrs.Value(key); !ok || v.Emit() != want {
				t.Errorf("span %q: %s = %q, want %q", s.Name(), key, v.Emit(), want)
			}
		}
		if s.Name() != "POST /v1/embeddings" {
			t.Errorf("span name %q", s.Name())
		}
	}
	if !found {
		t.Fatal("no request span")
	}
}
