package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Requests that declare more than their bytes: 4 MB of empty inputs, of
// parameters, of dimensions, over REST and gRPC. Each is refused as over
// the bounds (413 / RESOURCE_EXHAUSTED), allocating no more than a few
// times its bytes (a 16 MB body of `{}` inputs allocated 1.9 GB before).
func TestDeclaredSizeIsBounded(t *testing.T) {
	const size = 4 << 20
	repeat := func(head, item, tail string) []byte {
		return []byte(head + strings.Repeat(item, size/len(item)) + tail)
	}
	rest := map[string][]byte{
		"empty inputs":      repeat(`{"inputs": [{}`, `,{}`, `]}`),
		"parameters":        repeat(`{"parameters": {"a0": 0`, `,"a": 0`, `}, "inputs": []}`),
		"input parameters":  repeat(`{"inputs": [{"name": "x", "parameters": {"a0": 0`, `,"a": 0`, `}}]}`),
		"dimensions":        repeat(`{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1`, `,1`, `], "data": [1]}]}`),
		"requested outputs": repeat(`{"inputs": [{"name": "x"}], "outputs": [{}`, `,{}`, `]}`),
	}
	for name, body := range rest {
		var err error
		got := allocated(func() { _, err = decodeInferJSON(body, nil, "", nil) })
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeTooLarge || !errors.Is(err, errDeclared) {
			t.Fatalf("REST %s: %v, want over the bounds", name, err)
		}
		if ratio := float64(got) / float64(len(body)); ratio > 4 {
			t.Fatalf("REST %s: %d bytes allocated for a %d-byte body (%.1f×)", name, got, len(body), ratio)
		} else {
			t.Logf("REST %s: %.2f bytes allocated a byte of request", name, ratio)
		}
	}

	// gRPC: the same as wire bytes, through the server's codec.
	field := func(num protowire.Number, val []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), val)
	}
	input := func(extra []byte) []byte { return field(5, append(field(1, []byte("x")), extra...)) }
	wires := map[string][]byte{
		"empty inputs": bytes.Repeat(field(5, nil), size/2),
		"parameters":   bytes.Repeat(field(4, field(1, []byte("a"))), size/5),
		"dimensions":   input(field(3, bytes.Repeat([]byte{1}, size))),
		"outputs":      bytes.Repeat(field(6, nil), size/2),
		"raw contents": bytes.Repeat(field(7, nil), size/2),
	}
	g := &grpcService{s: &Server{budget: newBudget(1 << 30)}}
	codec := inferCodec{g: g}
	for name, wire := range wires {
		req := &pb.ModelInferRequest{}
		got := allocated(func() { codec.Unmarshal(memSlice(wire), req) })
		bad, ok := g.garbled.LoadAndDelete(req)
		if !ok || !errors.Is(bad.(error), errDeclared) {
			t.Fatalf("gRPC %s: %v, want over the bounds", name, bad)
		}
		if ratio := float64(got) / float64(len(wire)); ratio > 4 {
			t.Fatalf("gRPC %s: %d bytes allocated for a %d-byte message (%.1f×)", name, got, len(wire), ratio)
		} else {
			t.Logf("gRPC %s: %.2f bytes allocated a byte of request", name, ratio)
		}
	}
	// Within the bounds, a message decodes as before.
	ok := &pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 2}}}}
	wire, _ := proto.Marshal(ok)
	req := &pb.ModelInferRequest{}
	if err := codec.Unmarshal(memSlice(wire), req); err != nil || !proto.Equal(req, ok) {
		t.Fatalf("a request within the bounds: %v, %v", req, err)
	}
	if _, bad := g.garbled.Load(req); bad {
		t.Fatal("a request within the bounds was refused")
	}
}

func memSlice(b []byte) mem.BufferSlice { return mem.BufferSlice{mem.SliceBuffer(b)} }

// What checkDeclaredJSON counts is what the decoder would allocate:
// names matched as encoding/json matches them, data and unknown names
// not counted, duplicates counted.
func TestDeclaredJSON(t *testing.T) {
	list := func(item string, n int) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	for body, over := range map[string]bool{
		`{"inputs": [` + list(`{}`, maxTensors) + `]}`:                                            false,
		`{"inputs": [` + list(`{}`, maxTensors+1) + `]}`:                                          true,
		`{"INPUTS": [` + list(`{}`, maxTensors+1) + `]}`:                                          true,
		`{"\u0069nputs": [` + list(`{}`, maxTensors+1) + `]}`:                                     true,
		`{"inputſ": [` + list(`{}`, maxTensors+1) + `]}`:                                          true, // ſ folds to s
		`{"inputz": [` + list(`{}`, maxTensors+1) + `]}`:                                          false,
		`{"outputs": [` + list(`{"name": "a"}`, maxTensors+1) + `]}`:                              true,
		`{"parameters": {` + list(`"a": 1`, maxParameters+1) + `}}`:                               true, // one name, each time counted
		`{"parameters": {"a": [` + list(`1`, 1000) + `]}}`:                                        false,
		`{"inputs": [{"shape": [` + list(`1`, maxRank) + `], "data": [` + list(`1`, 999) + `]}]}`: false,
		`{"inputs": [{"shape": [` + list(`1`, maxRank+1) + `]}]}`:                                 true,
		`{"inputs": [{"name": "x]}\"", "Shape": [` + list(`2`, maxRank+1) + `]}]}`:                true,
		`{"inputs": [{"data": [` + list(`{"shape": [1]}`, maxTensors+1) + `]}]}`:                  false,
		`{"outputs": [{"shape": [` + list(`1`, maxRank+1) + `]}]}`:                                false, // an output has no shape
		`{"id": "[[[", "inputs": [{"parameters": {` + list(`"p": {}`, maxParameters+1) + `}}]}`:   true,
		`[` + list(`{}`, 1000) + `]`:                                                              false,
	} {
		err := checkDeclaredJSON([]byte(body))
		if over != errors.Is(err, errDeclared) {
			t.Errorf("%.80s…: %v, want over the bounds: %v", body, err, over)
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("%.80s… is not JSON", body)
		}
		if err == nil {
			checkWithinBounds(t, []byte(body))
		}
	}
}

// checkWithinBounds fails t if body, decoded as the server decodes it,
// holds more than a bound allows.
func checkWithinBounds(t *testing.T, body []byte) {
	t.Helper()
	var in restInferRequest
	if json.Unmarshal(body, &in) != nil {
		return
	}
	over := len(in.Inputs) > maxTensors || len(in.Outputs) > maxTensors || len(in.Parameters) > maxParameters
	for _, x := range in.Inputs {
		over = over || len(x.Shape) > maxRank || len(x.Parameters) > maxParameters
	}
	for _, x := range in.Outputs {
		over = over || len(x.Parameters) > maxParameters
	}
	if over {
		t.Fatalf("%.200q passed the bounds, and decodes over them", body)
	}
}

// FuzzDeclaredJSON: for any JSON body, the bounds scan refuses exactly
// what a walk of encoding/json's tokens finds over a bound, and what it
// lets through decodes within the bounds.
func FuzzDeclaredJSON(f *testing.F) {
	for _, s := range []string{`{"inputs":[{"shape":[1,2],"data":[[1,"]"],{}]}]}`, `{"PARAMETERS":{"a":1,"a":{"b":[]}}}`,
		`{"outputs":[{"parameters":{"binary_data":true}}],"id":"\"{"}`, `{"inputs":[{"\u0073hape":[1,1,1]}]}`, `[[],[[]]]`, `"s"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		dec := json.NewDecoder(strings.NewReader(body))
		want, err := overByTokens(dec, inferRequestValue)
		if err != nil || dec.More() || !json.Valid([]byte(body)) {
			checkDeclaredJSON([]byte(body)) // no panic, whatever it says
			return
		}
		got := checkDeclaredJSON([]byte(body))
		if want != errors.Is(got, errDeclared) || (!want && got != nil) {
			t.Fatalf("%q: %v, the token walk finds it over the bounds: %v", body, got, want)
		}
		if got == nil {
			checkWithinBounds(t, []byte(body))
		}
	})
}

// overByTokens reads one value of role r from dec, token by token, and
// reports whether it or a value in it holds more than its role's bound.
func overByTokens(dec *json.Decoder, r jsonRole) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return false, nil
	}
	over, n := false, 0
	for ; dec.More(); n++ {
		role := r.element()
		if delim == '{' {
			name, err := dec.Token()
			if err != nil {
				return false, err
			}
			role = memberByName(r, name.(string))
		}
		inner, err := overByTokens(dec, role)
		if err != nil {
			return false, err
		}
		over = over || inner
	}
	if _, err := dec.Token(); err != nil {
		return false, err
	}
	limit, _ := r.bound()
	return over || (limit > 0 && n > limit), nil
}

// memberByName is the role of the member named name in an object of role
// r: the fields of the request's structs, matched as encoding/json
// matches them.
func memberByName(r jsonRole, name string) jsonRole {
	fields := map[jsonRole]map[string]jsonRole{
		inferRequestValue: {"parameters": parametersValue, "inputs": inputsValue, "outputs": outputsValue},
		inputValue:        {"parameters": parametersValue, "shape": shapeValue},
		outputValue:       {"parameters": parametersValue},
	}
	for field, role := range fields[r] {
		if strings.EqualFold(name, field) {
			return role
		}
	}
	return otherValue
}
