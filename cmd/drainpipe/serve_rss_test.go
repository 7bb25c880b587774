package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// peakRSS returns a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err) // Linux only
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// wireCodec sends bytes as they are, for a message a client library
// would never build (millions of empty inputs).
type wireCodec struct{}

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (wireCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (wireCodec) Name() string                         { return "proto" }

// Requests that declare far more than their bytes — 16 MB of empty
// inputs over REST and over gRPC, four of them at once — grow the serve
// process's peak RSS by a few times their bytes, not by gigabytes (1.86
// GB for one before); it answers a plain request after, and SIGTERM
// exits 0.
func TestServeDeclaredSizeRSS(t *testing.T) {
	dir := fixture(t, 10, 16, 3)
	s := startServe(t, "--model", "m="+filepath.Join(dir, "model.dpmlp"), "--drain-grace", "0s")
	pid := s.cmd.Process.Pid
	before := peakRSS(t, pid)
	const size = 16 << 20
	body := []byte(`{"inputs": [{}` + strings.Repeat(`,{}`, size/3) + `]}`)
	resp, err := http.Post(s.http+"/v2/models/m/infer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("16 MB of empty inputs over REST: %d", resp.StatusCode)
	}
	conn, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	empty := protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), nil)
	wire := append(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "m"), bytes.Repeat(empty, size/len(empty))...)
	done := make(chan error, 4)
	for range 4 {
		go func() {
			var reply pb.ModelInferResponse
			done <- conn.Invoke(t.Context(), "/inference.GRPCInferenceService/ModelInfer", wire, &reply, grpc.ForceCodecV2(wireCodec{}),
				grpc.MaxCallSendMsgSize(64<<20))
		}()
	}
	for range 4 {
		if err := <-done; err == nil || !strings.Contains(err.Error(), "more than 256 inputs") {
			t.Fatalf("16 MB of empty inputs over gRPC: %v", err)
		}
	}
	grew := peakRSS(t, pid) - before
	t.Logf("peak RSS grew %d MB for 16 MB over REST and 4 × 16 MB at once over gRPC", grew>>20)
	if grew > 8*size {
		t.Fatalf("peak RSS grew %d MB", grew>>20)
	}
	resp, err = http.Post(s.http+"/v2/models/m/infer", "application/json", bytes.NewReader(featureBodyNamed("features", 1, 16)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a plain request after: %v %v", resp, err)
	}
	resp.Body.Close()
	s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.finished
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, s.logText())
	}
}
