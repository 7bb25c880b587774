package serve

import (
	"encoding/json"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// fuzzModel is a model of three inputs of different kinds, without a
// device: the fuzz targets stop at the record a batcher would be given.
func fuzzModel(t testing.TB) *model {
	input := arrow.NewSchema([]arrow.Field{
		{Name: "features", Type: arrow.FixedSizeListOfNonNullable(3, arrow.PrimitiveTypes.Float32)},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	m := &model{name: "fuzz", input: input, outputs: []TensorMetadata{{Name: "y", Datatype: "INT64", Shape: []int64{-1}}}}
	for _, f := range input.Fields() {
		md, err := metadata(f)
		if err != nil {
			t.Fatal(err)
		}
		m.inputs = append(m.inputs, md)
	}
	return m
}

// checkRecord turns a decoded request into the model's record, as infer
// does, and checks that an accepted one has the rows its shapes say.
func checkRecord(t *testing.T, m *model, req *inferRequest) {
	if err := m.checkOutputs(req.outputs); err != nil {
		return
	}
	rec, rows, err := m.record(req.inputs)
	if err != nil {
		return
	}
	defer rec.Release()
	if int(rec.NumRows()) != rows || rows != int(req.inputs[0].shape[0]) {
		t.Fatalf("record of %d rows, %d reported, shape %v", rec.NumRows(), rows, req.inputs[0].shape)
	}
	for i, col := range rec.Columns() {
		if col.Len() != rows {
			t.Fatalf("column %d: %d rows, want %d", i, col.Len(), rows)
		}
	}
}

// Arbitrary REST bodies: an error or a record of consistent shape, never a
// panic.
func FuzzRESTInfer(f *testing.F) {
	for _, seed := range []string{
		`{"id":"1","inputs":[{"name":"features","datatype":"FP32","shape":[2,3],"data":[1,2,3,4,5,6]},{"name":"id","datatype":"INT64","shape":[2],"data":[7,8]},{"name":"flag","datatype":"BOOL","shape":[2],"data":[true,false]}],"outputs":[{"name":"y"}]}`,
		`{"inputs":[{"name":"features","datatype":"FP32","shape":[1,3],"data":[[1,2,3]]},{"name":"id","datatype":"INT64","shape":[1],"data":[[7]]},{"name":"flag","datatype":"BOOL","shape":[1],"data":[[[true]]]}],"parameters":{"timeout":5}}`,
		`{"inputs":[{"name":"features","datatype":"FP32","shape":[0,3],"data":[]},{"name":"id","datatype":"INT64","shape":[0],"data":[]},{"name":"flag","datatype":"BOOL","shape":[0],"data":[]}]}`,
		`{"inputs":[{"name":"id","datatype":"INT64","shape":[9223372036854775807,9223372036854775807],"data":[1]}]}`,
		`{"inputs":[{"name":"id","datatype":"UINT8","shape":[1],"data":[300]}]}`,
		`{"inputs":[{"name":"id","datatype":"INT64","shape":[2000000000],"data":[1]}]}`,
	} {
		f.Add([]byte(seed))
	}
	m := fuzzModel(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeInferJSON(body, nil, "", nil)
		if err != nil {
			if codeOf(err) != CodeInvalid {
				t.Fatalf("a bad body gave %v, not CodeInvalid", err)
			}
			return
		}
		checkRecord(t, m, req)
	})
}

// Arbitrary gRPC messages, typed or raw.
func FuzzGRPCInfer(f *testing.F) {
	for _, req := range []*pb.ModelInferRequest{
		{Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "features", Datatype: "FP32", Shape: []int64{1, 3}, Contents: &pb.InferTensorContents{Fp32Contents: []float32{1, 2, 3}}},
			{Name: "id", Datatype: "INT64", Shape: []int64{1}, Contents: &pb.InferTensorContents{Int64Contents: []int64{4}}},
			{Name: "flag", Datatype: "BOOL", Shape: []int64{1}, Contents: &pb.InferTensorContents{BoolContents: []bool{true}}},
		}},
		{Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "features", Datatype: "FP32", Shape: []int64{2, 3}},
			{Name: "id", Datatype: "INT64", Shape: []int64{2}},
			{Name: "flag", Datatype: "BOOL", Shape: []int64{2}},
		}, RawInputContents: [][]byte{make([]byte, 24), make([]byte, 16), {0, 1}}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	m := fuzzModel(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		var in pb.ModelInferRequest
		if proto.Unmarshal(msg, &in) != nil {
			return
		}
		req, err := decodeGRPC(&in)
		if err != nil {
			if codeOf(err) != CodeInvalid {
				t.Fatalf("a bad message gave %v, not CodeInvalid", err)
			}
			return
		}
		checkRecord(t, m, req)
	})
}

// The strconv fast path for flat numeric arrays agrees with encoding/json:
// whatever it accepts, encoding/json decodes to the same values.
func FuzzFlatNumbers(f *testing.F) {
	for _, seed := range []string{`[1,2.5,-3e2]`, ` [ 0 , -0.0 ,1E+3 ] `, `[]`, `[1,]`, `[01]`, `[.5]`, `[+1]`, `[1e400]`, `[NaN]`, `[1,[2]]`, `[1 2]`, `[9223372036854775807]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkFlat[float32](t, raw)
		checkFlat[float64](t, raw)
		checkFlat[int64](t, raw)
	})
}

func checkFlat[T float32 | float64 | int64](t *testing.T, raw []byte) {
	fast, ok, err := flatNumbers(raw, []T(nil), 1<<30)
	if !ok || err != nil {
		return
	}
	var want []T
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%q: the fast path took it as %v, encoding/json refuses it: %v", raw, fast, err)
	}
	if len(fast) != len(want) {
		t.Fatalf("%q: %v against encoding/json's %v", raw, fast, want)
	}
	for i := range want {
		if fast[i] != want[i] {
			t.Fatalf("%q: element %d %v against encoding/json's %v", raw, i, fast[i], want[i])
		}
	}
}
