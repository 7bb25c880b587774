package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// The server holds at most its in-flight bytes of requests at once. A
// client that declares 200 KiB of a 256 KiB budget and stalls holds
// them: a request that would pass the budget is refused at once, 429
// with Retry-After over REST and RESOURCE_EXHAUSTED over gRPC, while one
// that fits beside it is answered; when the stalled client goes, its
// bytes come back and the refused request is taken.
func TestInflightBudget(t *testing.T) {
	const limit = 256 << 10
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))}, WithMaxRequestBytes(limit), WithMaxInflightBytes(limit))
	conn, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: drainpipe\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 200<<10)

	big := inferBody(rows(0, 1500), false, nil) // about 100 KiB of JSON
	post := func(b []byte) (int, http.Header) {
		t.Helper()
		resp, err := r.http.Post(r.url+"/v2/models/mlp/infer", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	bigJSON, _ := json.Marshal(big)
	if len(bigJSON) < 60<<10 || len(bigJSON) > 150<<10 {
		t.Fatalf("the large request is %d bytes", len(bigJSON))
	}
	// The stalled request holds its bytes once its handler has begun.
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, header := post(bigJSON)
		if code == http.StatusTooManyRequests {
			if header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a request past the budget: %d, want 429", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	small, _ := json.Marshal(inferBody(rows(0, 2), false, nil))
	if code, _ := post(small); code != http.StatusOK {
		t.Errorf("a request that fits beside the held one: %d", code)
	}
	_, err = r.grpc.ModelInfer(t.Context(), grpcInferRequest(rows(0, 2500))) // 80 KB of floats
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "max-inflight-bytes") {
		t.Errorf("gRPC past the budget: %v", err)
	}

	conn.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, _ := post(bigJSON)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the held request went: %d, want 200", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := r.grpc.ModelInfer(t.Context(), grpcInferRequest(rows(0, 2500))); err != nil {
		t.Errorf("gRPC once the budget is free: %v", err)
	}
}

// The budget holds at least one request of the largest size.
func TestInflightBudgetHoldsARequest(t *testing.T) {
	_, err := New([]ModelSpec{mlpSpec(t, testMLP(t))}, WithMaxRequestBytes(1<<20), WithMaxInflightBytes(1<<19))
	if err == nil || !strings.Contains(err.Error(), "hold no request") {
		t.Fatalf("got %v", err)
	}
	s, err := New([]ModelSpec{mlpSpec(t, testMLP(t))}, WithMaxRequestBytes(2<<30))
	if err != nil {
		t.Fatal(err)
	}
	if !s.budget.take(2<<30) || s.budget.take(1) {
		t.Error("the default budget is not the largest request's")
	}
}

// What the budget's hold and a charged body add to a REST request,
// against the handler alone (the request's own cost is microseconds),
// and what a gRPC infer request's charge costs (take, note, give back).
func BenchmarkBudgetHold(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 512)
	s := &Server{budget: newBudget(1 << 30), cfg: config{maxBody: 1 << 20, bodyTimeout: time.Minute}}
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.readBody(w, r); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("grpc", func(b *testing.B) {
		req := &pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{1, 128}}},
			RawInputContents: [][]byte{body}}
		for b.Loop() {
			n := int64(proto.Size(req))
			if !s.budget.take(n) {
				b.Fatal("no budget")
			}
			s.budget.give(n)
		}
	})
	for name, h := range map[string]http.Handler{"handler": read, "held": s.budget.hold(read)} {
		b.Run(name, func(b *testing.B) {
			w := httptest.NewRecorder()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v2/models/m/infer", bytes.NewReader(body))
				h.ServeHTTP(w, r)
			}
		})
	}
}
