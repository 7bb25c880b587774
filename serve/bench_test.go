package serve

import (
	"encoding/json"
	"testing"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// BenchmarkRESTCodec decodes a 32-row infer request of 64 features (and
// a 1-row one) and encodes a response of its size (32 classes, 32×10
// probabilities): the JSON work of one REST request.
func BenchmarkRESTCodec(b *testing.B) {
	data := make([]float32, 32*64)
	for i := range data {
		data[i] = float32(i%113)/56 - 1
	}
	request := func(rows int) []byte {
		body, _ := json.Marshal(map[string]any{"id": "r", "inputs": []map[string]any{{"name": "features", "datatype": "FP32", "shape": []int{rows, 64}, "data": data[:rows*64]}}})
		return body
	}
	body, row := request(32), request(1)
	resp := restInferResponse{ModelName: "m", ModelVersion: "1", Outputs: []restTensor{
		{Name: "class", Datatype: "INT64", Shape: []int64{32}, Data: make([]int64, 32)},
		{Name: "probabilities", Datatype: "FP32", Shape: []int64{32, 10}, Data: data[:320]},
	}}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := decodeInferJSON(body, nil, "", nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-1-row", func(b *testing.B) {
		b.SetBytes(int64(len(row)))
		for b.Loop() {
			if _, err := decodeInferJSON(row, nil, "", nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGRPCCodec decodes a 32-row infer request of 64 features in
// raw_input_contents and encodes a raw response of its size: the codec
// work of one gRPC request, past protobuf.
func BenchmarkGRPCCodec(b *testing.B) {
	data := make([]float32, 32*64)
	for i := range data {
		data[i] = float32(i%113)/56 - 1
	}
	raw := datatypes["FP32"].toRaw(data)
	in := &pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "features", Datatype: "FP32", Shape: []int64{32, 64}}}, RawInputContents: [][]byte{raw}}
	resp := &inferResponse{model: "m", version: "1", rows: 32, outputs: []*tensor{
		{name: "class", datatype: "INT64", shape: []int64{32}, data: make([]int64, 32)},
		{name: "probabilities", datatype: "FP32", shape: []int64{32, 10}, data: data[:320]}}}
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			req, err := decodeGRPC(in)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := datatypes["FP32"].check(req.inputs[0].data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			encodeGRPC(resp, true)
		}
	})
}
