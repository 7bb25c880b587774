package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
)

// peakRSS returns a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS is read from Linux's /proc")
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
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
// process's peak RSS by about their bytes held, not by gigabytes (1.86 GB
// for the REST one alone before); it answers a plain request after, and
// SIGTERM exits 0.
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
	// The bodies themselves are held (the REST one as it grows, each gRPC
	// message as received and in one piece): some 100–140 MB.
	if grew > 16*size {
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

// A polled repository changed as operators change it, with the shell's
// own tools: mkfifo for a version's model, ln -s /dev/zero, cp of a
// truncated model, a copy's temporary name. The served versions answer
// throughout, each fault is in the index, and SIGTERM exits 0 at once.
func TestServeRepositoryShellFaults(t *testing.T) {
	dir := fixture(t, 10, 16, 3)
	repo := t.TempDir()
	model := filepath.Join(dir, "model.dpmlp")
	half := filepath.Join(t.TempDir(), "half.dpmlp")
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(half, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	for _, v := range []string{"1", "3", "4", "5", "6"} {
		os.MkdirAll(filepath.Join(repo, "mlp", v), 0o755)
	}
	sh("cp", model, filepath.Join(repo, "mlp", "1", "model.dpmlp"))
	s := startServe(t, "--model-repository", repo, "--repository-poll", "20ms", "--drain-timeout", "30s")
	sh("mkfifo", filepath.Join(repo, "mlp", "3", "model.dpmlp"))
	sh("ln", "-s", "/dev/zero", filepath.Join(repo, "mlp", "4", "model.dpmlp"))
	sh("cp", half, filepath.Join(repo, "mlp", "5", "model.dpmlp"))
	sh("cp", model, filepath.Join(repo, "mlp", "6", "model.dpmlp.tmp"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Post(s.http+"/v2/models/mlp/infer", "application/json", bytes.NewReader(featureBodyNamed("features", 2, 16)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("infer while the repository holds faults: %d\n%s", resp.StatusCode, s.logText())
		}
		resp, err = http.Post(s.http+"/v2/repository/index", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		index, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		all := true
		for _, want := range []string{`"version":"1","state":"READY"`, `"version":"3","state":"UNAVAILABLE"`, `"version":"4","state":"UNAVAILABLE"`, `"version":"5","state":"UNAVAILABLE"`} {
			all = all && strings.Contains(string(index), want)
		}
		if all {
			if strings.Contains(string(index), `"version":"6"`) {
				t.Fatalf("a copy's temporary file taken as a version: %s", index)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index: %s", index)
		}
		time.Sleep(20 * time.Millisecond)
	}
	began := time.Now()
	s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.finished
	if err := s.cmd.Wait(); err != nil || time.Since(began) > 20*time.Second {
		t.Fatalf("exit after SIGTERM: %v after %v\n%s", err, time.Since(began), s.logText())
	}
}
