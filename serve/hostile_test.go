package serve

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	grpcmd "google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// Made-up model names do not grow /metrics: every name the server does
// not serve is one label value.
func TestMadeUpNamesDoNotGrowMetrics(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))})
	for i := range 200 {
		name := fmt.Sprintf("model-%d-%x", i, i*7919)
		if code, _ := r.do(t, "POST", "/v2/models/"+name+"/infer", inferBody(rows(0, 1), false, nil), nil); code != 404 {
			t.Fatalf("unknown model: %d", code)
		}
		if _, err := r.grpc.ModelInfer(t.Context(), grpcRows(name, rows(0, 1))); status.Code(err) != codes.NotFound {
			t.Fatalf("unknown model over gRPC: %v", err)
		}
	}
	_, body := r.do(t, "GET", "/metrics", nil, nil)
	var labels []string
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "drainpipe_requests_total{") {
			labels = append(labels, strings.TrimSpace(line))
		}
	}
	want := []string{
		`drainpipe_requests_total{code="404",model="_unknown",protocol="http"} 200`,
		`drainpipe_requests_total{code="NotFound",model="_unknown",protocol="grpc"} 200`,
	}
	if strings.Join(labels, "\n") != strings.Join(want, "\n") {
		t.Fatalf("request series:\n%s\nwant:\n%s", strings.Join(labels, "\n"), strings.Join(want, "\n"))
	}
}

// rawRequest opens a connection and sends the request line and headers
// of a POST to path, and body; it returns the connection.
func rawRequest(t *testing.T, r *running, path string, header string, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n%s\r\n%s", path, header, body)
	return c
}

// readStatus reads an HTTP response's status code from c (0 if the server
// closed the connection without one) within limit.
func readStatus(t *testing.T, c net.Conn, limit time.Duration) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(limit))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Bodies that do not come are cut: a declared size over the bound is
// refused before a byte of it is read; a body that stalls is answered 408
// at the body deadline; and a shutdown does not wait for a stalled body:
// it cuts it and drains clean.
func TestSlowAndHugeBodies(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithMaxRequestBytes(1<<20), WithBodyTimeout(300*time.Millisecond))
	huge := rawRequest(t, r, "/v2/models/mlp/infer", "Content-Length: 1099511627776\r\n", "")
	if code := readStatus(t, huge, 5*time.Second); code != 413 {
		t.Fatalf("a declared terabyte: %d, want 413 before the body", code)
	}
	stalled := rawRequest(t, r, "/v2/models/mlp/infer", "Content-Length: 1000\r\n", `{"inputs": [`)
	if code := readStatus(t, stalled, 5*time.Second); code != 408 {
		t.Fatalf("a stalled body: %d, want 408 at the body deadline", code)
	}

	// A shutdown with a client stalled mid-body drains clean, long before
	// its drain timeout.
	r2 := startServer(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithDrainTimeout(time.Minute))
	<-r2.srv.Ready()
	stuck := rawRequest(t, r2, "/v2/models/mlp/infer", "Content-Length: 1000\r\n", `{"inputs": [`)
	time.Sleep(50 * time.Millisecond) // the server is reading its body
	began := time.Now()
	if err := r2.shutdown(); err != nil {
		t.Fatalf("Run after a drain with a stalled body: %v", err)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("the drain waited %s for a stalled body", took)
	}
	readStatus(t, stuck, time.Second)
}

// Timeouts as clients send them: Triton's 2^64-1 µs ("none"), a header of
// 1e10 seconds and 0 (no timeout) all answer, never an immediate 504.
func TestTimeoutsDoNotWrap(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))})
	for name, c := range map[string]struct {
		params map[string]any
		header []string
	}{
		"triton none":     {params: map[string]any{"parameters": map[string]any{"timeout": uint64(18446744073709551615)}}},
		"microseconds":    {params: map[string]any{"parameters": map[string]any{"timeout": 18446744073709552}}},
		"zero parameter":  {params: map[string]any{"parameters": map[string]any{"timeout": 0}}},
		"huge header":     {header: []string{TimeoutHeader, "1e10"}},
		"zero header":     {header: []string{TimeoutHeader, "0"}},
		"duration header": {header: []string{TimeoutHeader, "10s"}},
	} {
		if code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 2), false, c.params), nil, c.header...); code != 200 {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	in := grpcRows("mlp", rows(0, 2))
	in.Parameters = map[string]*pb.InferParameter{"timeout": {ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: 1<<64 - 1}}}
	if _, err := r.grpc.ModelInfer(t.Context(), in); err != nil {
		t.Errorf("gRPC uint64 timeout of 2^64-1 µs: %v", err)
	}
}

// The protocol's edges: a wrong method is 405 with Allow; a gzip body is
// read (and a gzip bomb bounded); other encodings are refused; bytes that
// are not a protobuf message are INVALID_ARGUMENT, and counted.
func TestMethodsEncodingsAndGarbage(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithMaxRequestBytes(64<<10))
	req, _ := http.NewRequest("GET", r.url+"/v2/models/mlp/infer", nil)
	resp, err := r.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET on infer: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if code, _ := r.do(t, "DELETE", "/v2/nothing-here", nil, nil); code != 404 {
		t.Fatalf("an unknown path: %d", code)
	}

	gz := func(b []byte) []byte {
		var out bytes.Buffer
		w := gzip.NewWriter(&out)
		w.Write(b)
		w.Close()
		return out.Bytes()
	}
	body, _ := json.Marshal(inferBody(rows(0, 2), false, nil))
	var out restResponse
	if code, raw := r.do(t, "POST", "/v2/models/mlp/infer", gz(body), &out, "Content-Encoding", "gzip"); code != 200 || len(out.Outputs) == 0 {
		t.Fatalf("a gzip body: %d %s", code, raw)
	}
	bomb := gz(bytes.Repeat([]byte(" "), 10<<20)) // 10 MiB of spaces in a few kilobytes
	if code, raw := r.do(t, "POST", "/v2/models/mlp/infer", bomb, nil, "Content-Encoding", "gzip"); code != 413 {
		t.Fatalf("a gzip bomb: %d %s", code, raw)
	}
	if code, raw := r.do(t, "POST", "/v2/models/mlp/infer", body, nil, "Content-Encoding", "br"); code != 400 || !strings.Contains(string(raw), "gzip or none") {
		t.Fatalf("a brotli body: %d %s", code, raw)
	}
	// A gzip body damaged or cut short is a bad request (400), not a
	// client gone (499).
	whole := gz(body)
	damaged := bytes.Clone(whole)
	damaged[len(damaged)/2] ^= 0xff
	for name, b := range map[string][]byte{"damaged": damaged, "cut short": whole[:len(whole)/2], "a cut header": whole[:5]} {
		if code, raw := r.do(t, "POST", "/v2/models/mlp/infer", b, nil, "Content-Encoding", "gzip"); code != 400 {
			t.Fatalf("a gzip body %s: %d %s", name, code, raw)
		}
	}
	// Metadata is bounded (64 KiB a call), and a call over it leaves the
	// server answering the next.
	big := grpcmd.Pairs("x-padding", strings.Repeat("x", 1<<20))
	if _, err := r.grpc.ServerLive(grpcmd.NewOutgoingContext(t.Context(), big), &pb.ServerLiveRequest{}); err == nil {
		t.Fatal("a call with 1 MiB of metadata was taken")
	}
	if live, err := r.grpc.ServerLive(t.Context(), &pb.ServerLiveRequest{}); err != nil || !live.GetLive() {
		t.Fatalf("a call after one with 1 MiB of metadata: %v, %v", live, err)
	}

	var reply pb.ModelInferResponse
	err = r.conn.Invoke(t.Context(), "/inference.GRPCInferenceService/ModelInfer", rawBytes{0xff, 0xff, 0xff, 0x07, 0x01}, &reply,
		grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not a ModelInferRequest") {
		t.Fatalf("garbage protobuf: %v", err)
	}
	_, metrics := r.do(t, "GET", "/metrics", nil, nil)
	if !strings.Contains(string(metrics), `drainpipe_requests_total{code="InvalidArgument",model="_unknown",protocol="grpc"} 1`) {
		t.Fatalf("the garbage request is not counted:\n%s", metrics)
	}
}

// Readiness turns 503 as a drain begins, and the server goes on answering
// requests for the grace period, then stops taking them.
func TestDrainGrace(t *testing.T) {
	r := startServer(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithDrainGrace(time.Second))
	<-r.srv.Ready()
	if code, _ := r.do(t, "GET", "/v2/health/ready", nil, nil); code != 200 {
		t.Fatalf("ready before the drain: %d", code)
	}
	done := make(chan error, 1)
	go func() { done <- r.shutdown() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := r.do(t, "GET", "/v2/health/ready", nil, nil)
		if code == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readiness still %d after the drain began", code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Within the grace: still serving.
	if code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 2), false, nil), nil); code != 200 {
		t.Fatalf("a request in the drain grace: %d %s", code, body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// grpcRows is an infer request of rs for the named model.
func grpcRows(model string, rs [][]float32) *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: model, Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32",
		Shape: []int64{int64(len(rs)), features}, Contents: &pb.InferTensorContents{Fp32Contents: flat(rs)}}}}
}

// rawBytes and rawCodec send bytes as they are, as a broken client would.
type rawBytes []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(rawBytes))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return protoCodec.Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }

var protoCodec = encoding.GetCodecV2("proto")

// A flood of connections that never make a call is bounded: a listener
// holds at most its limit open (the rest wait in the kernel's backlog,
// taking no descriptor of the server's), REST liveness answers all the
// while, and gRPC answers once the flood is gone.
func TestConnectionFloodIsBounded(t *testing.T) {
	const limit = 8
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithMaxConnections(limit))
	addr := r.conn.Target()
	preface := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0) // and an empty SETTINGS frame
	var flood []net.Conn
	for range 3 * limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
		c.Write(preface)
	}
	answered, deadline := 0, time.Now().Add(time.Second)
	for _, c := range flood {
		c.SetReadDeadline(deadline)
		if _, err := io.ReadFull(c, make([]byte, 9)); err == nil {
			answered++ // the server's SETTINGS: it took the connection
		}
	}
	if answered > limit || answered == 0 {
		t.Fatalf("%d of %d idle connections taken, want 1 to %d", answered, len(flood), limit)
	}
	if code, _ := r.do(t, "GET", "/v2/health/live", nil, nil); code != 200 {
		t.Fatalf("liveness during a gRPC flood: %d", code)
	}
	for _, c := range flood {
		c.Close()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if live, err := pb.NewGRPCInferenceServiceClient(conn).ServerLive(t.Context(), &pb.ServerLiveRequest{}); err != nil || !live.GetLive() {
		t.Fatalf("gRPC after the flood: %v, %v", live, err)
	}
}
