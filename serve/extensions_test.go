package serve

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Triton's binary tensor data extension: inputs as little-endian bytes
// after the JSON header, outputs asked in binary answered the same way,
// the predictions those of the JSON request.
func TestBinaryTensors(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))})
	rs := rows(3, 5)
	var want restResponse
	if code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rs, false, nil), &want); code != 200 {
		t.Fatalf("JSON: %d %s", code, body)
	}
	var raw bytes.Buffer
	binary.Write(&raw, binary.LittleEndian, flat(rs))
	head, _ := json.Marshal(map[string]any{
		"inputs": []map[string]any{{"name": "features", "datatype": "FP32", "shape": []int{5, features},
			"parameters": map[string]any{"binary_data_size": raw.Len()}}},
		"outputs": []map[string]any{{"name": "probabilities", "parameters": map[string]any{"binary_data": true}}, {"name": "class"}},
	})
	req, _ := http.NewRequest("POST", r.url+"/v2/models/mlp/infer", io.MultiReader(bytes.NewReader(head), bytes.NewReader(raw.Bytes())))
	req.Header.Set(BinaryHeader, strconv.Itoa(len(head)))
	resp, err := r.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n, err := strconv.Atoi(resp.Header.Get(BinaryHeader))
	if resp.StatusCode != 200 || err != nil || n > len(body) {
		t.Fatalf("binary: %d, %s %q", resp.StatusCode, resp.Header.Get(BinaryHeader), body)
	}
	var got struct {
		Outputs []struct {
			Name       string          `json:"name"`
			Parameters map[string]int  `json:"parameters"`
			Data       json.RawMessage `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(body[:n], &got); err != nil {
		t.Fatal(err)
	}
	rest := body[n:]
	for _, o := range got.Outputs {
		var w restOutput
		for _, wo := range want.Outputs {
			if wo.Name == o.Name {
				w = wo
			}
		}
		switch o.Name {
		case "probabilities":
			size := o.Parameters["binary_data_size"]
			if size != 5*3*4 || len(rest) != size || o.Data != nil {
				t.Fatalf("binary output: size %d, %d bytes left, data %s", size, len(rest), o.Data)
			}
			var wantProbs []float32
			json.Unmarshal(w.Data, &wantProbs)
			for i, p := range wantProbs {
				if got := math.Float32frombits(binary.LittleEndian.Uint32(rest[4*i:])); got != p {
					t.Fatalf("probability %d: %v in binary, %v in JSON", i, got, p)
				}
			}
		case "class":
			if !bytes.Equal(o.Data, w.Data) {
				t.Fatalf("class in JSON: %s, want %s", o.Data, w.Data)
			}
		}
	}

	// A binary input of the wrong size, and bytes left over, are refused.
	for name, c := range map[string]struct {
		size  int
		extra int
	}{"short": {raw.Len() - 4, 0}, "left over": {raw.Len(), 8}} {
		head, _ := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": "features", "datatype": "FP32", "shape": []int{5, features},
			"parameters": map[string]any{"binary_data_size": c.size}}}})
		body := append(append(head, raw.Bytes()...), make([]byte, c.extra)...)
		if code, msg := r.do(t, "POST", "/v2/models/mlp/infer", body, nil, BinaryHeader, strconv.Itoa(len(head))); code != 400 {
			t.Errorf("%s: %d %s", name, code, msg)
		}
	}
}

// The statistics extension counts what the batcher did: requests
// answered and failed, rows, batches by size, times.
func TestStatistics(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))})
	var before struct {
		ModelStats []modelStats `json:"model_stats"`
	}
	if code, body := r.do(t, "GET", "/v2/models/mlp/stats", nil, &before); code != 200 || before.ModelStats[0].InferenceCount != 0 ||
		before.ModelStats[0].ExecutionCount != 0 || before.ModelStats[0].LastInference != 0 {
		t.Fatalf("statistics before any request: %d %s", code, body)
	}
	for i := range 3 {
		if code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, i+1), false, nil), nil); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	var stats struct {
		ModelStats []modelStats `json:"model_stats"`
	}
	for _, path := range []string{"/v2/models/stats", "/v2/models/mlp/stats", "/v2/models/mlp/versions/1/stats"} {
		if code, body := r.do(t, "GET", path, nil, &stats); code != 200 || len(stats.ModelStats) != 1 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		st := stats.ModelStats[0]
		// The warm-up row is not an inference: 1 + 2 + 3 rows in 3
		// requests; every batch size's device time is counted.
		if st.Name != "mlp" || st.InferenceCount != 6 || st.InferenceStats.Success.Count != 3 || st.InferenceStats.Success.NS <= 0 ||
			st.ExecutionCount < 1 || st.InferenceStats.ComputeInfer.Count != st.ExecutionCount || st.LastInference == 0 || len(st.BatchStats) == 0 {
			t.Fatalf("%s: %+v", path, st)
		}
		var perSize int64
		for _, b := range st.BatchStats {
			if b.ComputeInfer.NS <= 0 {
				t.Fatalf("%s: batch size %d: compute_infer %+v", path, b.BatchSize, b.ComputeInfer)
			}
			perSize += b.ComputeInfer.NS
		}
		if perSize != st.InferenceStats.ComputeInfer.NS {
			t.Fatalf("%s: compute_infer by size sums to %d ns, in all %d", path, perSize, st.InferenceStats.ComputeInfer.NS)
		}
	}
	if code, _ := r.do(t, "GET", "/v2/models/other/stats", nil, nil); code != 404 {
		t.Fatalf("stats of an unknown model: %d", code)
	}
	// The same over gRPC, Triton's method.
	resp, err := r.grpc.ModelStatistics(t.Context(), &pb.ModelStatisticsRequest{Name: "mlp"})
	if err != nil || len(resp.GetModelStats()) != 1 {
		t.Fatalf("gRPC statistics: %v, %v", resp, err)
	}
	if st := resp.GetModelStats()[0]; st.GetInferenceCount() != 6 || st.GetInferenceStats().GetSuccess().GetCount() != 3 || st.GetExecutionCount() < 1 {
		t.Fatalf("gRPC statistics: %v", st)
	}
	if _, err := r.grpc.ModelStatistics(t.Context(), &pb.ModelStatisticsRequest{Name: "other"}); status.Code(err) != codes.NotFound {
		t.Fatalf("gRPC statistics of an unknown model: %v", err)
	}
}
