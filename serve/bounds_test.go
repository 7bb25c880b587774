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
		got := allocated(func() { _, err = decodeInferJSON(body, nil, "") })
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
	g := &grpcService{}
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

// The element count a bound is checked on is the decoder's own.
func TestCountElements(t *testing.T) {
	for in, want := range map[string]int{
		`[]`: 0, ` [ ] `: 0, `{}`: 0, `[1]`: 1, `[1,2,3]`: 3, `[[1,2],[3]]`: 2, `{"a":1,"b":[1,2]}`: 2,
		`["a,b","c]\"d"]`: 2, `[{"x":[1,2,{"y":"}"}]}]`: 1, `["\\\\",1]`: 2, "[\n1 ,\t2\n]": 2, `null`: 0, `"s"`: 0, `[[]]`: 1, `[{}]`: 1,
	} {
		if got := countElements([]byte(in)); got != want {
			t.Errorf("countElements(%s) = %d, want %d", in, got, want)
		}
		var v any
		if err := json.Unmarshal([]byte(in), &v); err != nil {
			t.Fatalf("%s is not JSON: %v", in, err)
		}
		if arr, ok := v.([]any); ok && len(arr) != want {
			t.Errorf("%s: the decoder finds %d", in, len(arr))
		}
		if obj, ok := v.(map[string]any); ok && len(obj) != want {
			t.Errorf("%s: the decoder finds %d", in, len(obj))
		}
	}
}

// FuzzCountElements: for any JSON array or object, the count a bound is
// checked on is the decoder's.
func FuzzCountElements(f *testing.F) {
	for _, s := range []string{`[]`, `[1,"a,]",{"b":[2]}]`, `{"a":"\\"","b":{}}`, `[[],[[]]]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			return
		}
		want := 0
		switch v := v.(type) {
		case []any:
			want = len(v)
		case map[string]any:
			want = membersOf(t, in) // duplicate names too
		default:
			return
		}
		if got := countElements([]byte(in)); got != want {
			t.Fatalf("countElements(%q) = %d, want %d", in, got, want)
		}
	})
}

// membersOf counts an object's members as a token decoder reads them,
// duplicate names included.
func membersOf(t *testing.T, in string) int {
	dec := json.NewDecoder(strings.NewReader(in))
	dec.Token()
	n := 0
	for dec.More() {
		dec.Token()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}
