package serve

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// Every bad request gets a client error naming the problem, and nothing
// reaches the device.
func TestBadRequests(t *testing.T) {
	dev := &counted{Model: testMLP(t)}
	r := serveTest(t, []ModelSpec{mlpSpec(t, dev)}, WithMaxRequestBytes(4096))
	batches := dev.batches.Load()
	good := func(mod func(in map[string]any)) map[string]any {
		b := inferBody(rows(0, 2), false, nil)
		mod(b["inputs"].([]map[string]any)[0])
		return b
	}
	for _, tc := range []struct {
		name string
		body any
		code int
		want string
	}{
		{"malformed JSON", `{"inputs": [`, 400, "malformed JSON"},
		{"trailing garbage", `{"inputs": []} x`, 400, "malformed JSON"},
		{"no inputs", `{"inputs": []}`, 400, "no inputs"},
		{"wrong datatype", good(func(in map[string]any) { in["datatype"] = "FP64" }), 400, `input "features": datatype FP64, model takes FP32`},
		{"unknown datatype", good(func(in map[string]any) { in["datatype"] = "FP16" }), 400, `datatype "FP16" is not one`},
		{"wrong width", good(func(in map[string]any) { in["shape"] = []int{4, 4} }), 400, "shape [4 4], model takes [-1 8]"},
		{"wrong rank", good(func(in map[string]any) { in["shape"] = []int{16} }), 400, "shape [16], model takes [-1 8]"},
		{"negative dimension", good(func(in map[string]any) { in["shape"] = []int{-2, 8} }), 400, "negative dimension"},
		{"too few elements", good(func(in map[string]any) { in["shape"] = []int{3, 8} }), 400, "shape [3 8] holds 24 elements, data has 16"},
		{"string data", good(func(in map[string]any) { in["data"] = []string{"a"} }), 400, "a JSON string where float32 elements were expected"},
		{"nesting not the shape", good(func(in map[string]any) { in["data"] = [][][]float32{{flat(rows(0, 2))}} }), 400, "nested arrays that are not shape [2 8]: 3 deep"},
		{"a nested row too short", good(func(in map[string]any) { in["data"] = [][]float32{flat(rows(0, 1))[:7], flat(rows(0, 2))[7:]} }), 400, "an array at depth 2 holds 7 items, not 8"},
		{"more elements than the shape", good(func(in map[string]any) { in["data"] = flat(rows(0, 3)) }), 400, "more elements than the 16 the shape holds"},
		{"no data", good(func(in map[string]any) { delete(in, "data") }), 400, `input "features": no data`},
		{"unknown input", good(func(in map[string]any) { in["name"] = "x" }), 400, `input "x": model mlp has no such input; its inputs are features FP32 [-1 8]`},
		{"unknown output", inferBody(rows(0, 1), false, map[string]any{"outputs": []map[string]string{{"name": "logits"}}}), 400, `output "logits": model mlp has no such output`},
		{"bad timeout parameter", inferBody(rows(0, 1), false, map[string]any{"parameters": map[string]any{"timeout": "soon"}}), 400, "parameter timeout"},
		{"unknown model", inferBody(rows(0, 1), false, nil), 404, `no model "other"`},
		{"oversized body", inferBody(rows(0, 64), false, nil), 413, "request body over 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v2/models/mlp/infer"
			if tc.code == 404 {
				path = "/v2/models/other/infer"
			}
			code, body := r.do(t, "POST", path, tc.body, nil)
			if code != tc.code || !strings.Contains(errorMessage(t, body), tc.want) {
				t.Errorf("%d %s, want %d with %q", code, body, tc.code, tc.want)
			}
		})
	}
	if code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 1), false, nil), nil, TimeoutHeader, "later"); code != 400 || !strings.Contains(string(body), "neither a duration") {
		t.Errorf("bad timeout header: %d %s", code, body)
	}

	in := func(shape ...int64) *pb.ModelInferRequest_InferInputTensor {
		return &pb.ModelInferRequest_InferInputTensor{Name: "features", Datatype: "FP32", Shape: shape}
	}
	nan := flat(rows(0, 1))
	nan[3] = float32(math.NaN())
	for _, tc := range []struct {
		name string
		req  *pb.ModelInferRequest
		code codes.Code
		want string
	}{
		{"no contents", &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{in(1, 8)}}, codes.InvalidArgument, "no contents and no raw_input_contents"},
		{"contents of another type", &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{1, 8}, Contents: &pb.InferTensorContents{Fp64Contents: make([]float64, 8)}}}}, codes.InvalidArgument, "holds 8 elements, data has 0 (FP32 elements travel in the contents field of their type)"},
		{"raw size", &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{in(2, 8)}, RawInputContents: [][]byte{make([]byte, 60)}}, codes.InvalidArgument, "needs 64 raw bytes, got 60"},
		{"raw count", &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{in(1, 8)}, RawInputContents: [][]byte{make([]byte, 32), nil}}, codes.InvalidArgument, "raw_input_contents has 2 entries for 1 inputs"},
		{"raw and contents", &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{1, 8}, Contents: &pb.InferTensorContents{}}}, RawInputContents: [][]byte{make([]byte, 32)}}, codes.InvalidArgument, "both contents and raw_input_contents"},
		{"not finite", &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{1, 8}, Contents: &pb.InferTensorContents{Fp32Contents: nan}}}}, codes.InvalidArgument, `input "features": element 3 (row 0): NaN is not finite`},
		{"given twice", &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{in(1, 8), in(1, 8)}, RawInputContents: [][]byte{make([]byte, 32), make([]byte, 32)}}, codes.InvalidArgument, `input "features" given twice`},
		{"unknown model", &pb.ModelInferRequest{ModelName: "other", Inputs: []*pb.ModelInferRequest_InferInputTensor{in(1, 8)}, RawInputContents: [][]byte{make([]byte, 32)}}, codes.NotFound, `no model "other"`},
		{"oversized", &pb.ModelInferRequest{ModelName: "mlp", Inputs: []*pb.ModelInferRequest_InferInputTensor{in(256, 8)}, RawInputContents: [][]byte{make([]byte, 8192)}}, codes.ResourceExhausted, "larger than max"},
	} {
		t.Run("grpc "+tc.name, func(t *testing.T) {
			_, err := r.grpc.ModelInfer(t.Context(), tc.req)
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Errorf("%v, want %v with %q", err, tc.code, tc.want)
			}
		})
	}
	if got := dev.batches.Load() - batches; got != 0 {
		t.Errorf("%d batches reached the device", got)
	}
}

// blockedServer serves a fakedev model (int64 "id" → "y") whose batches
// wait for release.
func blockedServer(t *testing.T, batching online.Options, sopts ...Option) (*running, *fakedev.Model, *counted, func()) {
	fake := &fakedev.Model{}
	dev := &counted{Model: fake}
	input := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	spec := ModelSpec{Name: "fake", Model: dev, Input: input,
		Options:  []predict.Option{predict.WithBatchSize(4), predict.WithAllocator(arrowtest.Allocator(t))},
		Batching: online.Options{MaxDelay: online.NoDelay, QueueRows: batching.QueueRows}}
	r := serveTest(t, []ModelSpec{spec}, sopts...)
	block := make(chan struct{})
	fake.Block = block
	var once sync.Once
	return r, fake, dev, func() { once.Do(func() { close(block) }) }
}

func idBody(ids ...int64) map[string]any {
	return map[string]any{"inputs": []map[string]any{{"name": "id", "datatype": "INT64", "shape": []int{len(ids)}, "data": ids}}}
}

// waitFor polls cond (a server's internal state) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A full queue refuses at once (429 / RESOURCE_EXHAUSTED); a deadline that
// passes answers 504 / DEADLINE_EXCEEDED; a client that goes away cancels
// its request.
func TestOverloadDeadlineDisconnect(t *testing.T) {
	r, fake, _, release := blockedServer(t, online.Options{QueueRows: 4})
	defer release()
	m, _ := r.srv.lookup("fake", "")
	p0 := fake.Predicts.Load() // the warm-up's
	var wg sync.WaitGroup
	defer wg.Wait()
	// One request runs (blocked), one fills the queue.
	for i := range 2 {
		wg.Go(func() {
			if code, body := r.do(t, "POST", "/v2/models/fake/infer", idBody(1, 2, 3, 4), nil); code != 200 {
				t.Errorf("request %d: %d %s", i, code, body)
			}
		})
		waitFor(t, "the request to queue", func() bool { return fake.Predicts.Load() == p0+1 && m.batcher.QueuedRows() == 4*i })
	}
	if code, body := r.do(t, "POST", "/v2/models/fake/infer", idBody(5), nil); code != http.StatusTooManyRequests || !strings.Contains(string(body), "overloaded") {
		t.Errorf("over the queue bound: %d %s", code, body)
	}
	raw := &pb.ModelInferRequest{ModelName: "fake", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "id", Datatype: "INT64", Shape: []int64{1}, Contents: &pb.InferTensorContents{Int64Contents: []int64{5}}}}}
	if _, err := r.grpc.ModelInfer(t.Context(), raw); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gRPC over the queue bound: %v", err)
	}
	release()
	wg.Wait()
	fake.Block = nil // later batches run at once

	block := make(chan struct{})
	fake.Block = block
	defer close(block)
	wg.Go(func() { r.do(t, "POST", "/v2/models/fake/infer", idBody(1, 2, 3, 4), nil) })
	waitFor(t, "a running batch", func() bool { return m.batcher.QueuedRows() == 0 && fake.Predicts.Load() == p0+3 })
	if code, body := r.do(t, "POST", "/v2/models/fake/infer", idBody(7), nil, TimeoutHeader, "30ms"); code != http.StatusGatewayTimeout || !strings.Contains(string(body), "deadline") {
		t.Errorf("timeout header: %d %s", code, body)
	}
	withParam := idBody(7)
	withParam["parameters"] = map[string]any{"timeout": 30000}
	if code, body := r.do(t, "POST", "/v2/models/fake/infer", withParam, nil); code != http.StatusGatewayTimeout {
		t.Errorf("timeout parameter: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	if _, err := r.grpc.ModelInfer(ctx, raw); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("gRPC deadline: %v", err)
	}
	// The server's side of the gRPC request may still be queued.
	waitFor(t, "the gRPC request to finish", func() bool {
		return testutil.ToFloat64(r.srv.metrics.requests.WithLabelValues("fake", "grpc", "DeadlineExceeded")) == 1 && m.batcher.QueuedRows() == 0
	})
	before := m.batcher.Stats()
	// A client that disconnects: its request leaves the queue.
	ctx, cancel = context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", r.url+"/v2/models/fake/infer", strings.NewReader(`{"inputs":[{"name":"id","datatype":"INT64","shape":[1],"data":[9]}]}`))
	errc := make(chan error, 1)
	go func() {
		resp, err := r.http.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, "the request to queue", func() bool { return m.batcher.QueuedRows() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v", err)
	}
	waitFor(t, "the request to leave", func() bool { return m.batcher.QueuedRows() == 0 })
	waitFor(t, "the handler to finish", func() bool {
		return testutil.ToFloat64(r.srv.metrics.requests.WithLabelValues("fake", "http", "499")) == 1
	})
	if s := m.batcher.Stats(); s.Cancellations <= before.Cancellations {
		t.Errorf("stats: %d cancellations, %d before the client went away", s.Cancellations, before.Cancellations)
	}
	// Metrics saw each outcome.
	_, body := r.do(t, "GET", "/metrics", nil, nil)
	for _, want := range []string{
		`drainpipe_requests_total{code="429",model="fake",protocol="http"} 1`,
		`drainpipe_requests_total{code="ResourceExhausted",model="fake",protocol="grpc"} 1`,
		`drainpipe_requests_total{code="504",model="fake",protocol="http"} 2`,
		`drainpipe_requests_total{code="DeadlineExceeded",model="fake",protocol="grpc"} 1`,
		`drainpipe_requests_total{code="499",model="fake",protocol="http"} 1`,
		`drainpipe_batch_size_rows_count{model="fake"}`,
		`drainpipe_queue_wait_seconds_bucket{model="fake"`,
		`drainpipe_batch_padding_ratio_bucket{model="fake"`,
		`drainpipe_queue_rows{model="fake",version="1"} 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s in\n%s", want, body)
		}
	}
}

// Shutdown under load: readiness turns false, requests taken are answered,
// the sessions shut down once, Run returns nil.
func TestGracefulDrain(t *testing.T) {
	r, fake, dev, release := blockedServer(t, online.Options{QueueRows: 64})
	m, _ := r.srv.lookup("fake", "")
	p0 := fake.Predicts.Load()
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Go(func() { statuses[i], _ = r.do(t, "POST", "/v2/models/fake/infer", idBody(int64(i)), nil) })
	}
	waitFor(t, "requests in flight", func() bool {
		return fake.Predicts.Load() == p0+1 && m.batcher.QueuedRows()+fake.Batches()[p0].Rows == len(statuses)
	})
	done := make(chan error, 1)
	go func() { done <- r.shutdown() }()
	waitFor(t, "draining", func() bool { return !r.srv.isReady() })
	if ready, err := r.grpc.ServerReady(t.Context(), &pb.ServerReadyRequest{}); err == nil && ready.GetReady() {
		t.Error("ready while draining")
	}
	release()
	if err := <-done; err != nil {
		t.Errorf("Run after a drain: %v", err)
	}
	wg.Wait()
	for i, c := range statuses {
		if c != 200 {
			t.Errorf("request %d: %d", i, c)
		}
	}
	if dev.starts.Load() != 1 || dev.shutdowns.Load() != 1 || fake.Live.Load() != 0 {
		t.Errorf("%d sessions started, %d shut down, %d live", dev.starts.Load(), dev.shutdowns.Load(), fake.Live.Load())
	}
}

// A drain that outlasts its timeout refuses what is left, still shuts the
// sessions down once, and says so.
func TestDrainTimeout(t *testing.T) {
	r, fake, dev, release := blockedServer(t, online.Options{}, WithDrainTimeout(100*time.Millisecond))
	defer release()
	got := make(chan int, 1)
	go func() {
		status := -1 // stays if r.do fails the test (and ends this goroutine)
		defer func() { got <- status }()
		status, _ = r.do(t, "POST", "/v2/models/fake/infer", idBody(1), nil)
	}()
	p0 := fake.Predicts.Load()
	waitFor(t, "a running batch", func() bool { return fake.Predicts.Load() == p0+1 })
	if err := r.shutdown(); !errors.Is(err, ErrDrainTimeout) {
		t.Errorf("Run: %v, want ErrDrainTimeout", err)
	}
	if c := <-got; c != http.StatusServiceUnavailable && c != http.StatusInternalServerError {
		t.Errorf("the request cut off: %d", c)
	}
	if dev.shutdowns.Load() != 1 || dev.live.Load() != 0 {
		t.Errorf("%d sessions shut down, %d live", dev.shutdowns.Load(), dev.live.Load())
	}
}

// Live at once; ready only when every session has started.
func TestReadyAfterStart(t *testing.T) {
	gate := make(chan struct{})
	dev := &counted{Model: testMLP(t), gate: gate}
	r := startServer(t, []ModelSpec{mlpSpec(t, dev)})
	if code, _ := r.do(t, "GET", "/v2/health/live", nil, nil); code != 200 {
		t.Errorf("live while starting: %d", code)
	}
	if code, body := r.do(t, "GET", "/v2/health/ready", nil, nil); code != http.StatusServiceUnavailable || string(body) != `{"ready":false}` {
		t.Errorf("ready while starting: %d %s", code, body)
	}
	if code, _ := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 1), false, nil), nil); code != http.StatusServiceUnavailable {
		t.Errorf("infer while starting: %d", code)
	}
	close(gate)
	<-r.srv.Ready()
	if code, _ := r.do(t, "GET", "/v2/health/ready", nil, nil); code != 200 {
		t.Errorf("ready after start: %d", code)
	}
}

// errorMessage decodes a REST error body.
func errorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Errorf("error body %s is not {\"error\": ...}", body)
	}
	return e.Error
}

// A model that cannot start stops the server with its error; the models
// started before it shut their sessions down.
func TestStartFailure(t *testing.T) {
	good := &counted{Model: testMLP(t)}
	bad := &counted{Model: &fakedev.Model{StartErr: fakedev.ErrInjected}}
	input := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	r := startServer(t, []ModelSpec{mlpSpec(t, good), {Name: "bad", Model: bad, Input: input}})
	err := <-r.done
	r.done <- nil
	if !errors.Is(err, fakedev.ErrInjected) || !strings.Contains(err.Error(), "model bad") {
		t.Errorf("Run: %v, want the bad model's start error", err)
	}
	if good.starts.Load() == 0 || good.live.Load() != 0 {
		t.Errorf("the good model: %d sessions started, %d live", good.starts.Load(), good.live.Load())
	}
	select {
	case <-r.srv.Ready():
		t.Error("ready after a failed start")
	default:
	}
}

// An open grpc.health.v1 Watch does not hold a drain to its timeout: the
// watcher is told NOT_SERVING, then its stream ends, and Run returns at
// once without ErrDrainTimeout.
func TestHealthWatchEndsWithTheDrain(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, &counted{Model: testMLP(t)})}, WithDrainTimeout(time.Minute))
	watch, err := healthpb.NewHealthClient(r.conn).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Ready closes just before the health turns SERVING: the first
	// status may still be NOT_SERVING, the next is SERVING.
	for {
		st, err := watch.Recv()
		if err != nil {
			t.Fatalf("watching for SERVING: %v", err)
		}
		if st.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
	}
	began := time.Now()
	if err := r.shutdown(); err != nil {
		t.Fatalf("Run with a Watch open: %v", err)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("the drain took %v with a Watch open", took)
	}
	var last healthpb.HealthCheckResponse_ServingStatus
	for {
		st, err := watch.Recv()
		if err != nil {
			break
		}
		last = st.GetStatus()
	}
	if last != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("the watcher's last status: %v, want NOT_SERVING", last)
	}
}
