package serve

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/predict"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// libraryPredictions runs rows through the offline Predictor.
func libraryPredictions(t *testing.T, m device.Model, rs [][]float32) (classes []int64, probs []float32) {
	t.Helper()
	b := array.NewFixedSizeListBuilder(memory.DefaultAllocator, features, arrow.PrimitiveTypes.Float32)
	defer b.Release()
	vals := b.ValueBuilder().(*array.Float32Builder)
	for _, r := range rs {
		b.Append(true)
		vals.AppendValues(r, nil)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(mlpInput(), []arrow.Array{col}, int64(len(rs)))
	defer rec.Release()
	p, err := predict.New(m, predict.WithBatchSize(8))
	if err != nil {
		t.Fatal(err)
	}
	for out, err := range p.All(t.Context(), dataset.FromRecords(mlpInput(), rec)) {
		if err != nil {
			t.Fatal(err)
		}
		classes = append(classes, out.Column(0).(*array.Int64).Int64Values()...)
		l := out.Column(1).(*array.FixedSizeList)
		probs = append(probs, l.ListValues().(*array.Float32).Float32Values()[l.Offset()*3:(l.Offset()+l.Len())*3]...)
	}
	return classes, probs
}

type restOutput struct {
	Name     string          `json:"name"`
	Datatype string          `json:"datatype"`
	Shape    []int64         `json:"shape"`
	Data     json.RawMessage `json:"data"`
}

type restResponse struct {
	ModelName    string       `json:"model_name"`
	ModelVersion string       `json:"model_version"`
	ID           string       `json:"id"`
	Outputs      []restOutput `json:"outputs"`
}

func inferBody(rs [][]float32, nested bool, extra map[string]any) map[string]any {
	var data any = flat(rs)
	if nested {
		data = rs
	}
	body := map[string]any{"inputs": []map[string]any{{"name": "features", "datatype": "FP32", "shape": []int{len(rs), features}, "data": data}}}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

// Predictions through REST and gRPC equal the library's for the same
// rows, whatever the request sizes and forms.
func TestInferMatchesLibrary(t *testing.T) {
	m := &counted{Model: testMLP(t)}
	r := serveTest(t, []ModelSpec{mlpSpec(t, m)})
	all := rows(0, 40)
	wantClass, wantProb := libraryPredictions(t, testMLP(t), all)

	var mu sync.Mutex
	gotClass := make([]int64, len(all))
	gotProb := make([]float32, len(all)*3)
	var wg sync.WaitGroup
	// Requests of 1, 3, 5, 7 and 24 rows, concurrently, alternating
	// protocols and forms.
	starts := []int{0, 1, 4, 9, 16, 40}
	for i := range len(starts) - 1 {
		lo, hi := starts[i], starts[i+1]
		wg.Go(func() {
			var cls []int64
			var prob []float32
			switch i % 3 {
			case 0, 1: // REST, flat and nested
				var resp restResponse
				code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(all[lo:hi], i%3 == 1, map[string]any{"id": fmt.Sprint(i)}), &resp)
				if code != http.StatusOK {
					t.Errorf("rows %d..%d: %d %s", lo, hi, code, body)
					return
				}
				if resp.ID != fmt.Sprint(i) || resp.ModelName != "mlp" || resp.ModelVersion != "1" || len(resp.Outputs) != 2 {
					t.Errorf("response %+v", resp)
					return
				}
				if o := resp.Outputs[0]; o.Name != "class" || o.Datatype != "INT64" || !slices.Equal(o.Shape, []int64{int64(hi - lo)}) {
					t.Errorf("class output %+v", o)
				}
				if o := resp.Outputs[1]; o.Name != "probabilities" || o.Datatype != "FP32" || !slices.Equal(o.Shape, []int64{int64(hi - lo), 3}) {
					t.Errorf("probabilities output %+v", o)
				}
				if err := errors.Join(json.Unmarshal(resp.Outputs[0].Data, &cls), json.Unmarshal(resp.Outputs[1].Data, &prob)); err != nil {
					t.Errorf("outputs of rows %d..%d: %v", lo, hi, err)
					return
				}
			case 2: // gRPC, raw
				raw := binary.LittleEndian.AppendUint32(nil, 0)[:0]
				for _, v := range flat(all[lo:hi]) {
					raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
				}
				resp, err := r.grpc.ModelInfer(t.Context(), &pb.ModelInferRequest{ModelName: "mlp", Id: "g",
					Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{int64(hi - lo), features}}},
					RawInputContents: [][]byte{raw}})
				if err != nil {
					t.Error(err)
					return
				}
				if resp.GetId() != "g" || len(resp.GetRawOutputContents()) != 2 || resp.GetOutputs()[1].GetContents() != nil {
					t.Errorf("response %v", resp)
					return
				}
				cls = make([]int64, hi-lo)
				binary.Decode(resp.GetRawOutputContents()[0], binary.LittleEndian, cls)
				prob = make([]float32, (hi-lo)*3)
				binary.Decode(resp.GetRawOutputContents()[1], binary.LittleEndian, prob)
			}
			mu.Lock()
			copy(gotClass[lo:], cls)
			copy(gotProb[lo*3:], prob)
			mu.Unlock()
		})
	}
	wg.Wait()
	// And typed gRPC contents for the last rows, asking for one output.
	resp, err := r.grpc.ModelInfer(t.Context(), &pb.ModelInferRequest{ModelName: "mlp", ModelVersion: "1",
		Inputs:  []*pb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{2, features}, Contents: &pb.InferTensorContents{Fp32Contents: flat(all[38:])}}},
		Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "class"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetOutputs()) != 1 || !slices.Equal(resp.GetOutputs()[0].GetContents().GetInt64Contents(), wantClass[38:]) {
		t.Errorf("typed gRPC class output %v, want %v", resp.GetOutputs(), wantClass[38:])
	}
	if !slices.Equal(gotClass, wantClass) {
		t.Errorf("classes\n got %v\nwant %v", gotClass, wantClass)
	}
	if !slices.Equal(gotProb, wantProb) {
		t.Errorf("probabilities differ from the library's")
	}
}

// The endpoints besides infer, in both protocols.
func TestMetadataAndHealth(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, &counted{Model: testMLP(t)})}, WithServerVersion("drainpipe", "v9"))
	var meta modelMetadataJSON
	for _, path := range []string{"/v2/models/mlp", "/v2/models/mlp/versions/1"} {
		if code, body := r.do(t, "GET", path, nil, &meta); code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		want := modelMetadataJSON{Name: "mlp", Versions: []string{"1"}, Platform: "drainpipe",
			Inputs:  []TensorMetadata{{Name: "features", Datatype: "FP32", Shape: []int64{-1, features}}},
			Outputs: []TensorMetadata{{Name: "class", Datatype: "INT64", Shape: []int64{-1}}, {Name: "probabilities", Datatype: "FP32", Shape: []int64{-1, 3}}}}
		if fmt.Sprint(meta) != fmt.Sprint(want) {
			t.Errorf("%s: %+v, want %+v", path, meta, want)
		}
	}
	for path, want := range map[string]string{
		"/v2":                             `{"extensions":["statistics","binary_tensor_data"],"name":"drainpipe","version":"v9"}`,
		"/v2/health/live":                 `{"live":true}`,
		"/v2/health/ready":                `{"ready":true}`,
		"/v2/models/mlp/ready":            `{"name":"mlp","ready":true}`,
		"/v2/models/mlp/versions/1/ready": `{"name":"mlp","ready":true}`,
	} {
		if code, body := r.do(t, "GET", path, nil, nil); code != http.StatusOK || string(body) != want {
			t.Errorf("%s: %d %s, want %s", path, code, body, want)
		}
	}
	for path, want := range map[string]string{
		"/v2/models/nope":                 `no model "nope"`,
		"/v2/models/mlp/versions/2":       `has no version "2"`,
		"/v2/models/nope/ready":           `no model`,
		"/v2/models/mlp/versions/2/infer": ``,
		"/v3":                             `no endpoint GET /v3`,
	} {
		method := "GET"
		if strings.HasSuffix(path, "infer") {
			method = "POST"
		}
		code, body := r.do(t, method, path, inferBody(rows(0, 1), false, nil), nil)
		if code != http.StatusNotFound || !strings.Contains(errorMessage(t, body), want) {
			t.Errorf("%s: %d %s, want 404 with %s", path, code, body, want)
		}
	}

	ctx := t.Context()
	if live, err := r.grpc.ServerLive(ctx, &pb.ServerLiveRequest{}); err != nil || !live.GetLive() {
		t.Errorf("ServerLive %v %v", live, err)
	}
	if ready, err := r.grpc.ServerReady(ctx, &pb.ServerReadyRequest{}); err != nil || !ready.GetReady() {
		t.Errorf("ServerReady %v %v", ready, err)
	}
	if ready, err := r.grpc.ModelReady(ctx, &pb.ModelReadyRequest{Name: "mlp"}); err != nil || !ready.GetReady() {
		t.Errorf("ModelReady %v %v", ready, err)
	}
	if md, err := r.grpc.ServerMetadata(ctx, &pb.ServerMetadataRequest{}); err != nil || md.GetName() != "drainpipe" || md.GetVersion() != "v9" {
		t.Errorf("ServerMetadata %v %v", md, err)
	}
	md, err := r.grpc.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "mlp"})
	if err != nil || md.GetPlatform() != "drainpipe" || len(md.GetInputs()) != 1 || !slices.Equal(md.GetOutputs()[1].GetShape(), []int64{-1, 3}) {
		t.Errorf("ModelMetadata %v %v", md, err)
	}
	if _, err := r.grpc.ModelMetadata(ctx, &pb.ModelMetadataRequest{Name: "mlp", Version: "7"}); status.Code(err) != codes.NotFound {
		t.Errorf("ModelMetadata of a missing version: %v", err)
	}
	if _, err := r.grpc.ModelReady(ctx, &pb.ModelReadyRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("ModelReady of a missing model: %v", err)
	}
}

// The specification's own infer example, for a model with its inputs and
// output: as printed it is malformed (input1 has shape [3] and one
// element, and 3 rows against input0's 2), and gets a 400 naming that;
// corrected, it gets the response the specification shows for it.
func TestSpecificationExample(t *testing.T) {
	input := arrow.NewSchema([]arrow.Field{
		{Name: "input0", Type: arrow.FixedSizeListOfNonNullable(2, arrow.PrimitiveTypes.Uint32)},
		{Name: "input1", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	dev := &counted{Model: specModel{}}
	r := serveTest(t, []ModelSpec{{Name: "mymodel", Model: dev, Input: input, Options: []predict.Option{predict.WithBatchSize(4)}}})
	batches := dev.batches.Load()

	asPrinted := `{
      "id" : "42",
      "inputs" : [
        {
          "name" : "input0",
          "shape" : [ 2, 2 ],
          "datatype" : "UINT32",
          "data" : [ 1, 2, 3, 4 ]
        },
        {
          "name" : "input1",
          "shape" : [ 3 ],
          "datatype" : "BOOL",
          "data" : [ true ]
        }
      ],
      "outputs" : [
        {
          "name" : "output0"
        }
      ]
    }`
	code, body := r.do(t, "POST", "/v2/models/mymodel/infer", asPrinted, nil, "Content-Type", "application/json")
	if code != http.StatusBadRequest || !strings.Contains(errorMessage(t, body), `input "input1": shape [3] holds 3 elements, data has 1`) {
		t.Errorf("the example as printed: %d %s", code, body)
	}
	corrected := strings.Replace(strings.Replace(asPrinted, `"shape" : [ 3 ]`, `"shape" : [ 2 ]`, 1), `[ true ]`, `[ true, false ]`, 1)
	code, body = r.do(t, "POST", "/v2/models/mymodel/infer", corrected, nil)
	want := `{"model_name":"mymodel","model_version":"1","id":"42","outputs":[{"name":"output0","datatype":"FP32","shape":[2,2],"data":[1.1,2.1,3,4]}]}`
	if code != http.StatusOK || string(body) != want {
		t.Errorf("the corrected example: %d %s\nwant %s", code, body, want)
	}
	if got := dev.batches.Load() - batches; got != 1 {
		t.Errorf("%d batches for one good request, want 1", got)
	}
}

// specModel computes output0 = input0 + 0.1·input1 for the spec example.
type specModel struct{}

func (specModel) Start(context.Context, device.SessionConfig) (device.Session, error) {
	return specModel{}, nil
}

func (specModel) Shutdown(context.Context) error { return nil }

func (specModel) Predict(_ context.Context, b device.Batch) (arrow.RecordBatch, error) {
	in0 := b.Record.Column(0).(*array.FixedSizeList)
	vals := in0.ListValues().(*array.Uint32)
	flags := b.Record.Column(1).(*array.Boolean)
	bld := array.NewFixedSizeListBuilderWithField(memory.DefaultAllocator, 2, arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32})
	defer bld.Release()
	fb := bld.ValueBuilder().(*array.Float32Builder)
	for i := range int(b.Record.NumRows()) {
		bld.Append(true)
		add := float32(0)
		if flags.Value(i) {
			add = 0.1
		}
		for j := range 2 {
			fb.Append(float32(vals.Value((in0.Offset()+i)*2+j)) + add)
		}
	}
	col := bld.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "output0", Type: col.DataType()}}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{col}, b.Record.NumRows()), nil
}
