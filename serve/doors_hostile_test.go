package serve

import (
	"bytes"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/drainpipe/drainpipe/internal/testing/hostile"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// hostileSize is the size of the large hostile bodies: under the default
// 64 MiB request bound, so each is read whole; 8 MiB under the race
// detector, which scans 60 MiB bodies for minutes (the bounds are ratios
// to the body, the same at either size).
func hostileSize() int {
	if raceEnabled {
		return 8 << 20
	}
	return 60 << 20
}

// Hostile bodies on every door are answered in the door's own shape, a
// client's fault with a 4xx, and bounded: a request allocates at most 4×
// its body, a refused one at most 3× (the body read, encoding/json's
// copy of the inputs' field, and one text decoded from it).
func TestHostileBodiesOnEveryDoor(t *testing.T) {
	if testing.Short() {
		t.Skip("60 MiB bodies")
	}
	tok := &charTokens{maxLen: 16}
	r := serveTest(t, []ModelSpec{textSpec(t, tok)})
	size := hostileSize()
	for payloadName, payload := range hostile.Payloads(size) {
		for doorName, door := range hostile.Doors("enc", size) {
			body := door.Body(payload)
			var code int
			var answer []byte
			got := allocated(func() {
				resp, err := r.http.Post(r.url+door.Path, "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var b bytes.Buffer
				b.ReadFrom(resp.Body)
				code, answer = resp.StatusCode, b.Bytes()
			})
			limit := 3*uint64(len(body)) + 1<<20
			if code == http.StatusOK {
				limit = 4*uint64(len(body)) + 1<<20
			}
			t.Logf("%s, %s: %d, %.2f bytes allocated a byte of body", doorName, payloadName, code, float64(got)/float64(len(body)))
			if code >= 500 || got > limit {
				t.Errorf("%s, %s (%d bytes): %d %.200s; allocated %d bytes, want at most %d", doorName, payloadName, len(body), code, answer, got, limit)
			}
		}
	}
	// gRPC: ids, one string and 10^6 strings, as wire bytes, and contents
	// of more elements than the shape declares.
	grpcBodies := map[string][]byte{
		"ids":                   grpcInput("input_ids", "INT64", []int64{1, int64(size)}, 3, make([]byte, size)),
		"ids in a [1, 4]":       grpcInput("input_ids", "INT64", []int64{1, 4}, 3, make([]byte, size)),
		"one string":            grpcInput("text", "BYTES", []int64{1}, 8, protowire.AppendBytes(nil, bytes.Repeat([]byte("x"), size))),
		"10^6 strings":          grpcInput("text", "BYTES", []int64{1_000_000}, 8, bytes.Repeat([]byte{1, 'a'}, 1_000_000)),
		"10^6 strings in a [1]": grpcInput("text", "BYTES", []int64{1}, 8, bytes.Repeat([]byte{1, 'a'}, 1_000_000)),
		"floats in a [1,1]":     grpcInput("input_ids", "FP32", []int64{1, 1}, 6, make([]byte, size)),
	}
	for name, wire := range grpcBodies {
		var reply pb.ModelInferResponse
		var err error
		got := allocated(func() {
			err = r.conn.Invoke(t.Context(), "/inference.GRPCInferenceService/ModelInfer", rawBytes(wire), &reply, grpc.ForceCodecV2(rawCodec{}))
		})
		t.Logf("gRPC, %s: %v, %.2f bytes allocated a byte of message", name, status.Code(err), float64(got)/float64(len(wire)))
		limit := 3*uint64(len(wire)) + 1<<20
		if err == nil {
			limit = 4*uint64(len(wire)) + 1<<20
		}
		if c := status.Code(err); c == codes.Internal || c == codes.Unknown || got > limit {
			t.Errorf("gRPC, %s (%d bytes): %v; allocated %d bytes", name, len(wire), err, got)
		}
	}
	var rows [][]float32
	if code, b := r.do(t, http.MethodPost, "/embed", map[string]any{"inputs": []string{"after", "them"}}, &rows); code != http.StatusOK || len(rows) != 2 {
		t.Errorf("a request after the hostile ones: %d %s", code, b)
	}
}

// grpcInput is the wire bytes of a ModelInferRequest to "enc" of one
// input whose contents field holds the given bytes: packed numbers, or
// bytes elements each already framed (field 8).
func grpcInput(name, datatype string, shape []int64, contentsField protowire.Number, contents []byte) []byte {
	field := func(b []byte, num protowire.Number, val []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), val)
	}
	var dims, c []byte
	for _, d := range shape {
		dims = protowire.AppendVarint(dims, uint64(d))
	}
	if contentsField != 8 {
		c = field(nil, contentsField, contents)
	}
	for rest := contents; contentsField == 8 && len(rest) > 0; {
		v, n := protowire.ConsumeBytes(rest)
		c, rest = field(c, 8, v), rest[n:]
	}
	in := field(field(field(field(nil, 1, []byte(name)), 2, []byte(datatype)), 3, dims), 5, c)
	return field(field(nil, 1, []byte("enc")), 5, in)
}
