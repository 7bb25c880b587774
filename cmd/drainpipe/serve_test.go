package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
	"github.com/drainpipe/drainpipe/storage"
)

// served is a drainpipe serve process started for a test.
type served struct {
	cmd      *exec.Cmd
	http     string // base URL
	grpc     string // address
	mu       sync.Mutex
	log      bytes.Buffer
	finished chan struct{}
}

func (s *served) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

var listening = regexp.MustCompile(`msg=listening protocol=(\w+) addr=(\S+)`)

// startServe runs drainpipe serve on free loopback ports and waits until
// it is ready.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, finished: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(s.finished)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			if m := listening.FindStringSubmatch(line); m != nil {
				if m[1] == "http" {
					s.http = "http://" + m[2]
				} else {
					s.grpc = m[2]
				}
			}
			s.mu.Unlock()
			if strings.Contains(line, "msg=ready") {
				close(ready)
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.finished
		cmd.Wait()
	})
	select {
	case <-ready:
	case <-s.finished:
		t.Fatalf("serve exited before ready:\n%s", s.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve not ready:\n%s", s.logText())
	}
	return s
}

// featureBodyNamed is a REST infer body of rows×width FP32 values for the
// input name.
func featureBodyNamed(name string, rows, width int) []byte {
	data := make([]float32, rows*width)
	for i := range data {
		data[i] = float32(i%97) / 50
	}
	b, _ := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": name, "datatype": "FP32", "shape": []int{rows, width}, "data": data}}})
	return b
}

// SIGTERM under load: every request is answered or refused cleanly, the
// model closes once, and the process exits 0. The requests the server
// answered are exactly those the clients received.
func TestServeSIGTERMUnderLoad(t *testing.T) {
	dir := fixture(t, 10, 16, 8, 3)
	s := startServe(t, "--model", "m="+filepath.Join(dir, "model.dpmlp"), "--max-delay", "1ms", "--access-log")

	conn, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewGRPCInferenceServiceClient(conn)
	httpClient := &http.Client{Transport: &http.Transport{}}
	defer httpClient.CloseIdleConnections()

	var answered, refused atomic.Int64
	var unclean sync.Map
	var wg sync.WaitGroup
	body := featureBodyNamed("features", 3, 16)
	for w := range 6 {
		wg.Go(func() {
			for {
				var ok, stop bool
				if w%2 == 0 {
					resp, err := httpClient.Post(s.http+"/v2/models/m/infer", "application/json", bytes.NewReader(body))
					if err != nil { // connection refused or closed before an answer
						refused.Add(1)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					ok, stop = resp.StatusCode == 200, resp.StatusCode == http.StatusServiceUnavailable
					if !ok && !stop {
						unclean.Store(fmt.Sprintf("http %d %s", resp.StatusCode, b), true)
					}
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err := client.ModelInfer(ctx, &pb.ModelInferRequest{ModelName: "m", Inputs: []*pb.ModelInferRequest_InferInputTensor{
						{Name: "features", Datatype: "FP32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{Fp32Contents: make([]float32, 16)}}}})
					cancel()
					ok, stop = err == nil, status.Code(err) == codes.Unavailable
					if !ok && !stop {
						unclean.Store(fmt.Sprintf("grpc %v", err), true)
					}
				}
				if ok {
					answered.Add(1)
				} else {
					refused.Add(1)
					return
				}
			}
		})
	}
	for answered.Load() < 200 {
		time.Sleep(time.Millisecond)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	<-s.finished
	err = s.cmd.Wait()
	log := s.logText()
	if err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, log)
	}
	unclean.Range(func(k, _ any) bool { t.Errorf("not answered cleanly: %s", k); return true })
	if n := strings.Count(log, "msg=\"batcher closed\""); n != 1 {
		t.Errorf("model closed %d times:\n%s", n, log)
	}
	m := regexp.MustCompile(`msg="batcher closed" model=m error=<nil> stats.requests=(\d+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no close stats:\n%s", log)
	}
	served, _ := strconv.Atoi(m[1])
	if int64(served) != answered.Load()+1 { // and the warm-up row
		t.Errorf("the server answered %d requests (and the warm-up), the clients received %d", served-1, answered.Load())
	}
	t.Logf("%d answered, %d refused after SIGTERM", answered.Load(), refused.Load())
	for _, want := range []string{"msg=draining", "msg=stopped", "msg=request protocol=http model=m code=200", "msg=request protocol=grpc model=m code=OK"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

// The flags a serve command cannot start with say why.
func TestServeFlagErrors(t *testing.T) {
	dir := fixture(t, 10, 16, 3)
	model := filepath.Join(dir, "model.dpmlp")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--model or --model-repository is required"},
		{[]string{"--model", model, "--model", "b=" + model, "--name", "x"}, "--name names the one model served"},
		{[]string{"--model", model, "--http", "", "--grpc", ""}, "nothing to listen on"},
		{[]string{"--model", model, "--model-repository", dir}, "--model and --model-repository together"},
		{[]string{"--model", model, filepath.Join(dir, "other.dpmlp")}, "one model a --model: repeat it"},
		{[]string{"--model", model, "--model", model, "--http", "127.0.0.1:0", "--grpc", ""}, `model "model" given twice`},
		{[]string{"--model", filepath.Join(dir, "missing.dpmlp")}, "missing.dpmlp"},
		{[]string{"--model", model, "--batch-sizes", "4,x"}, `"x" is not a number`},
		// Checked before the ports are bound: busy is taken, and the error
		// is the flag's, not the address's.
		{[]string{"--model", model, "--http", busy, "--batch-size", "8", "--batch-sizes", "1,4"}, "--batch-size 8 and --batch-sizes 1,4 disagree"},
		{[]string{"--model", model, "--http", busy, "--batch-sizes", "4,2"}, "batch sizes"},
		{[]string{"--model", model, "--http", busy, "stray"}, `unexpected argument "stray"`},
		{[]string{"--model", model, "--http", busy, "--tls-cert", model}, "--tls-cert and --tls-key go together"},
		{[]string{"--model", model, "--http", busy, "--tls-cert", model, "--tls-key", model}, "--tls-cert, --tls-key"},
		{[]string{"--model", model, "--http", busy, "--chunk-pool", "max"}, `--chunk-pool "max": the one pooling is mean`},
		{[]string{"--model", model, "--http", busy, "--chunk-overlap", "8"}, "--chunk-overlap and --max-chunks go with --chunk-pool"},
		{[]string{"--model", model, "--http", busy, "--chunk-pool", "mean", "--max-chunks", "0"}, "--max-chunks 0"},
	} {
		_, stderr, err := drainpipe(append([]string{"serve"}, tc.args...)...)
		if err == nil || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "address already in use") {
			t.Errorf("serve %v: %v, stderr %s; want %q", tc.args, err, stderr, tc.want)
		}
	}
	stdout, stderr, err := drainpipe("serve", "--help")
	if err != nil || !strings.Contains(stdout+stderr, "curl -s localhost:8080/v2/models/model/infer") {
		t.Errorf("serve --help: %v %s", err, stdout+stderr)
	}
}

// serve --model-repository with --repository-poll: a version dropped into
// the folder is served, with the ones the policy keeps, and metadata,
// the index and gRPC health say so.
func TestServeModelRepository(t *testing.T) {
	dir := fixture(t, 10, 16, 3)
	model := arrowtest.ReadFile(t, filepath.Join(dir, "model.dpmlp"))
	repo := t.TempDir()
	put := func(v string) {
		if err := os.MkdirAll(filepath.Join(repo, "mlp", v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, "mlp", v, "model.dpmlp"), model, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("1")
	if err := os.WriteFile(filepath.Join(repo, "mlp", "config.json"), []byte(`{"version_policy": {"latest": 2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--model-repository", repo, "--repository-poll", "50ms")
	put("2")
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(s.http + "/v2/models/mlp")
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Versions []string }
		json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if strings.Join(meta.Versions, ",") == "1,2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versions %v, want 1,2\n%s", meta.Versions, s.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Post(s.http+"/v2/models/mlp/infer", "application/json", bytes.NewReader(featureBodyNamed("features", 2, 16)))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		ModelVersion string `json:"model_version"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode != 200 || out.ModelVersion != "2" {
		t.Fatalf("infer: %d, version %q", resp.StatusCode, out.ModelVersion)
	}
	conn, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "mlp"})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health of mlp: %v, %v", h, err)
	}
	resp, err = http.Post(s.http+"/v2/repository/index", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	index, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(index), `{"name":"mlp","version":"2","state":"READY"}`) {
		t.Fatalf("index: %s", index)
	}
}

// The built server against hostile clients: made-up model names do not
// grow /metrics; a declared terabyte is refused before it is read; and
// SIGTERM with a client stalled mid-body answers readiness 503 for the
// drain grace, cuts the stalled body and exits 0, long before its drain
// timeout.
func TestServeHostileClients(t *testing.T) {
	dir := fixture(t, 10, 16, 3)
	s := startServe(t, "--model", "m="+filepath.Join(dir, "model.dpmlp"), "--drain-grace", "300ms", "--drain-timeout", "2m")
	for i := range 300 {
		resp, err := http.Post(fmt.Sprintf("%s/v2/models/made-up-%d/infer", s.http, i), "application/json", bytes.NewReader(featureBodyNamed("features", 1, 16)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := http.Get(s.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(metrics), "made-up"); n > 0 || !strings.Contains(string(metrics), `drainpipe_requests_total{code="404",model="_unknown",protocol="http"} 300`) {
		t.Fatalf("metrics after 300 made-up names: %d mentions", n)
	}

	raw := func(header, body string) net.Conn {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.http, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\n%s\r\n%s", header, body)
		return c
	}
	huge := raw("Content-Length: 1099511627776\r\n", "")
	huge.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(huge), nil); err != nil || resp.StatusCode != 413 {
		t.Fatalf("a declared terabyte: %v %v", resp, err)
	}
	raw("Content-Length: 1000\r\n", `{"inputs": [`) // and nothing more
	time.Sleep(100 * time.Millisecond)

	began := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sawDraining := false
	for time.Since(began) < 250*time.Millisecond {
		if resp, err := http.Get(s.http + "/v2/health/ready"); err == nil {
			resp.Body.Close()
			sawDraining = sawDraining || resp.StatusCode == 503
		}
		time.Sleep(10 * time.Millisecond)
	}
	<-s.finished
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM with a stalled client: %v\n%s", err, s.logText())
	}
	if took := time.Since(began); !sawDraining || took > time.Minute {
		t.Fatalf("readiness 503 seen: %t; exit after %s", sawDraining, took)
	}
}

// serve --model-repository on object storage: an MLP and its Triton
// config.pbtxt in an S3 bucket (VersityGW on loopback), found by listing
// and served; a version put later is served once the poll lists it.
func TestServeModelRepositoryOnS3(t *testing.T) {
	dir := fixture(t, 10, 16, 3)
	model := arrowtest.ReadFile(t, filepath.Join(dir, "model.dpmlp"))
	srv := s3test.Start(t)
	srv.Bucket(t, "models")
	store := storage.NewOpener()
	defer store.Close()
	put := func(key string, data []byte) {
		t.Helper()
		if err := store.WriteFile(t.Context(), srv.URL("models", key), data, true); err != nil {
			t.Fatal(err)
		}
	}
	put("mlp/config.pbtxt", []byte("name: \"mlp\"\nmax_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 100 }\n"))
	put("mlp/1/model.dpmlp", model)
	s := startServe(t, "--model-repository", srv.URL("models", ""), "--repository-poll", "50ms")
	version := func() string {
		resp, err := http.Post(s.http+"/v2/models/mlp/infer", "application/json", bytes.NewReader(featureBodyNamed("features", 2, 16)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			ModelVersion string `json:"model_version"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		return out.ModelVersion
	}
	if v := version(); v != "1" {
		t.Fatalf("served version %q\n%s", v, s.logText())
	}
	put("mlp/2/model.dpmlp", model)
	for deadline := time.Now().Add(20 * time.Second); version() != "2"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("version 2 never served\n%s", s.logText())
		}
	}
}
