package servebench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"google.golang.org/grpc"

	"github.com/drainpipe/drainpipe/serve"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// The bare servers are the floor of the server's own stack: the same
// grpc-go service and net/http, decoding the same requests (JSON parsed
// into floats, binary and raw contents taken as they are) and answering a
// fixed response of the right shape, with no batcher and no model. What
// drainpipe's server costs above them is its own.
//
// Given a Run, they are what a Go user writes instead of drainpipe: the
// same stack running the model on each request as it comes, no batching.

// Width is the features a row of the benchmark's model takes, and
// Classes the Classes it tells apart (the MLP 64-256-256-10).
const (
	Width   = 64
	Classes = 10
)

// Run runs the model on a request's rows (Width features each, row after
// row) and returns each row's class and Classes probabilities.
type Run func(ctx context.Context, rows int, features []float32) (class []int64, probs []float32, err error)

// answer returns the response to rows of features: run's, or the fixed
// one (zeros) if run is nil.
func (run Run) answer(ctx context.Context, rows int, features func() []float32) (class []int64, probs []float32, err error) {
	if run == nil {
		return make([]int64, rows), make([]float32, rows*Classes), nil
	}
	return run(ctx, rows, features())
}

// bareGRPC answers ModelInfer with the response for the request's rows.
type bareGRPC struct {
	pb.UnimplementedGRPCInferenceServiceServer
	run Run
}

func (b bareGRPC) ModelInfer(ctx context.Context, in *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	if len(in.GetInputs()) != 1 || len(in.GetInputs()[0].GetShape()) != 2 || len(in.GetRawInputContents()) != 1 {
		return nil, fmt.Errorf("bare: want one raw input")
	}
	rows := int(in.GetInputs()[0].GetShape()[0])
	if len(in.GetRawInputContents()[0]) != rows*Width*4 {
		return nil, fmt.Errorf("bare: %d raw bytes for %d rows", len(in.GetRawInputContents()[0]), rows)
	}
	class, probs, err := b.run.answer(ctx, rows, func() []float32 { return floats(in.GetRawInputContents()[0]) })
	if err != nil {
		return nil, err
	}
	raw := make([]byte, 8*len(class))
	for i, c := range class {
		binary.LittleEndian.PutUint64(raw[8*i:], uint64(c))
	}
	return &pb.ModelInferResponse{ModelName: "mlp", ModelVersion: "1",
		Outputs: []*pb.ModelInferResponse_InferOutputTensor{
			{Name: "class", Datatype: "INT64", Shape: []int64{int64(rows)}},
			{Name: "probabilities", Datatype: "FP32", Shape: []int64{int64(rows), Classes}}},
		RawOutputContents: [][]byte{raw, RawFloats(probs)}}, nil
}

// floats decodes little-endian float32s.
func floats(b []byte) []float32 {
	values := make([]float32, len(b)/4)
	for i := range values {
		values[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return values
}

// bareREST decodes an infer request as the server does and answers it,
// in JSON or in binary as asked.
func (run Run) bareREST(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req struct {
		Inputs []struct {
			Shape []int64         `json:"shape"`
			Data  json.RawMessage `json:"data"`
		} `json:"inputs"`
	}
	head, bin := body, []byte(nil)
	if h := r.Header.Get(serve.BinaryHeader); h != "" {
		n, err := strconv.Atoi(h)
		if err != nil || n > len(body) {
			http.Error(w, "bad header length", http.StatusBadRequest)
			return
		}
		head, bin = body[:n], body[n:]
	}
	if err := json.Unmarshal(head, &req); err != nil || len(req.Inputs) != 1 || len(req.Inputs[0].Shape) != 2 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rows := int(req.Inputs[0].Shape[0])
	if bin != nil {
		_, probs, err := run.answer(r.Context(), rows, func() []float32 { return floats(bin) })
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out := RawFloats(probs)
		head, _ := json.Marshal(map[string]any{"model_name": "mlp", "model_version": "1", "outputs": []map[string]any{
			{"name": "probabilities", "datatype": "FP32", "shape": []int{rows, Classes}, "parameters": map[string]any{"binary_data_size": len(out)}}}})
		w.Header().Set(serve.BinaryHeader, strconv.Itoa(len(head)))
		w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(out)))
		w.Write(head)
		w.Write(out)
		return
	}
	var values []float32
	if err := json.Unmarshal(req.Inputs[0].Data, &values); err != nil || len(values) != rows*Width {
		http.Error(w, "bad data", http.StatusBadRequest)
		return
	}
	class, probs, err := run.answer(r.Context(), rows, func() []float32 { return values })
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b, _ := json.Marshal(map[string]any{"model_name": "mlp", "model_version": "1", "outputs": []map[string]any{
		{"name": "class", "datatype": "INT64", "shape": []int{rows}, "data": class},
		{"name": "probabilities", "datatype": "FP32", "shape": []int{rows, Classes}, "data": probs}}})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// StartBare starts the bare servers on loopback, answering with run's
// predictions or (run nil) the fixed response; stop ends them.
func StartBare(run Run) (restURL, grpcAddr string, stop func(), err error) {
	hl, gl, err := listenTwo()
	if err != nil {
		return "", "", nil, err
	}
	hs := &http.Server{Handler: http.HandlerFunc(run.bareREST)}
	gs := grpc.NewServer(grpc.NumStreamWorkers(256)) // the model server's setting
	pb.RegisterGRPCInferenceServiceServer(gs, bareGRPC{run: run})
	go hs.Serve(hl)
	go gs.Serve(gl)
	return "http://" + hl.Addr().String() + "/v2/models/mlp/infer", gl.Addr().String(), func() {
		hs.Close()
		gs.Stop()
	}, nil
}
