package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
	dptensor "github.com/drainpipe/drainpipe/tensor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counted wraps a device model: it counts sessions and batches, and can
// hold Start until gate closes.
type counted struct {
	device.Model
	gate                             chan struct{}
	starts, shutdowns, live, batches atomic.Int32
}

func (c *counted) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	if c.gate != nil {
		<-c.gate
	}
	s, err := c.Model.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.starts.Add(1)
	c.live.Add(1)
	return &countedSession{Session: s, c: c}, nil
}

type countedSession struct {
	device.Session
	c *counted
}

func (s *countedSession) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	s.c.batches.Add(1)
	return s.Session.Predict(ctx, b)
}

func (s *countedSession) Shutdown(ctx context.Context) error {
	s.c.shutdowns.Add(1)
	s.c.live.Add(-1)
	return s.Session.Shutdown(ctx)
}

const features = 8

// testMLP is a small MLP of 8 features and 3 classes.
func testMLP(t testing.TB) *cpu.MLP {
	m, err := cpu.NewMLP([]int{features, 16, 3}, cpu.ReLU, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mlpInput() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{{Name: "features", Type: dptensor.Type(features)}}, nil)
}

// mlpSpec serves m as "mlp" with batches of 8 and a checked allocator.
func mlpSpec(t testing.TB, m device.Model, opts ...predict.Option) ModelSpec {
	mem := arrowtest.Allocator(t)
	return ModelSpec{Name: "mlp", Model: m, Input: mlpInput(),
		Options:  append([]predict.Option{predict.WithBatchSizes(2, 8), predict.WithAllocator(mem)}, opts...),
		Batching: online.Options{MaxDelay: time.Millisecond}}
}

// running is a server started on loopback for a test.
type running struct {
	srv  *Server
	url  string
	conn *grpc.ClientConn
	grpc pb.GRPCInferenceServiceClient
	http *http.Client
	stop context.CancelFunc
	done chan error
}

// serveTest starts a server on free loopback ports and stops it (checking
// a clean drain) when the test ends.
func serveTest(t *testing.T, specs []ModelSpec, opts ...Option) *running {
	t.Helper()
	r := startServer(t, specs, opts...)
	select {
	case <-r.srv.Ready():
	case err := <-r.done:
		t.Fatalf("server stopped before ready: %v", err)
	}
	return r
}

func startServer(t *testing.T, specs []ModelSpec, opts ...Option) *running {
	t.Helper()
	srv, err := New(specs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, url: "http://" + hl.Addr().String(), stop: cancel, done: make(chan error, 1), http: &http.Client{Transport: &http.Transport{}}}
	go func() { r.done <- srv.Run(ctx, hl, gl) }()
	r.conn, err = grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.grpc = pb.NewGRPCInferenceServiceClient(r.conn)
	t.Cleanup(func() {
		r.conn.Close()
		r.http.CloseIdleConnections()
		cancel()
		select {
		case err := <-r.done:
			if err != nil && !t.Failed() {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	return r
}

// shutdown stops the server and returns Run's error.
func (r *running) shutdown() error {
	r.stop()
	err := <-r.done
	r.done <- nil // for the cleanup
	return err
}

// do sends a REST request and decodes the JSON answer into out (if not
// nil); it returns the status and the raw body.
func (r *running) do(t *testing.T, method, path string, body any, out any, header ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, r.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := r.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode, b
}

// rows returns n rows of features, row i starting at start+i.
func rows(start, n int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, features)
		for j := range out[i] {
			out[i][j] = float32((start+i)*features+j)/97 - 1
		}
	}
	return out
}

func flat(rs [][]float32) []float32 {
	var out []float32
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

// writeFile writes a test's file, failing the test if it cannot.
func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
