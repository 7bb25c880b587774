package serve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	pb "github.com/drainpipe/drainpipe/serve/inferencepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// testRepository is a model repository in a temporary folder whose model
// files hold a seed: Load makes an MLP of it, counting every session
// started and shut down across versions.
type testRepository struct {
	dir string
	dev *counted // the sessions of every version loaded
	mu  sync.Mutex
}

func newTestRepository(t *testing.T) *testRepository {
	return &testRepository{dir: t.TempDir(), dev: &counted{}}
}

// put writes version v of model name, from seed.
func (tr *testRepository) put(t *testing.T, name, v string, seed string) {
	t.Helper()
	dir := filepath.Join(tr.dir, name, v)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Written aside and renamed, as a deployment drops a file in.
	tmp := filepath.Join(tr.dir, "."+name+v)
	if err := os.WriteFile(tmp, []byte(seed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "model.seed")); err != nil {
		t.Fatal(err)
	}
}

func (tr *testRepository) repository(t *testing.T, poll time.Duration) Repository {
	mem := arrowtest.Allocator(t)
	return Repository{Dir: tr.dir, Poll: poll, Files: []string{"model.seed"}, Load: func(_ context.Context, path string) (ModelSpec, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return ModelSpec{}, err
		}
		seed, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return ModelSpec{}, fmt.Errorf("%s: not a seed: %w", path, err)
		}
		m, err := cpu.NewMLP([]int{features, 16, 3}, cpu.ReLU, rand.New(rand.NewPCG(seed, 2)))
		if err != nil {
			return ModelSpec{}, err
		}
		return ModelSpec{Model: sharedCounts{Model: m, total: tr.dev}, Input: mlpInput(),
			Options:  []predict.Option{predict.WithBatchSizes(2, 8), predict.WithAllocator(mem)},
			Batching: online.Options{MaxDelay: time.Millisecond}}, nil
	}}
}

// The repository API in explicit mode: the models load at start; a new
// version loads on request and replaces the old (policy: latest); unload
// takes the model out; config.json serves every version; a file that does
// not load is listed with its reason; names outside the folder are refused.
func TestRepositoryExplicit(t *testing.T) {
	tr := newTestRepository(t)
	tr.put(t, "mlp", "1", "11")
	r := serveTest(t, nil, WithRepository(tr.repository(t, 0)))
	index := func() string { t.Helper(); return r.indexText(t) }
	version := func() string { t.Helper(); return r.servedVersion(t) }
	if got := index(); got != "mlp 1 READY" || version() != "1" {
		t.Fatalf("at start: %s", got)
	}
	if _, body := r.do(t, "GET", "/v2", nil, nil); !strings.Contains(string(body), `"model_repository"`) {
		t.Fatalf("server metadata: %s", body)
	}
	tr.put(t, "mlp", "2", "22")
	if got := index(); got != "mlp 1 READY" {
		t.Fatalf("explicit mode loads on request only: %s", got)
	}
	if code, body := r.do(t, "POST", "/v2/repository/models/mlp/load", nil, nil); code != 200 {
		t.Fatalf("load: %d %s", code, body)
	}
	if got := index(); got != "mlp 2 READY" || version() != "2" {
		t.Fatalf("after loading version 2: %s", got)
	}
	writeFile(t, filepath.Join(tr.dir, "mlp", "config.json"), `{"version_policy": {"all": true}, "max_delay": "1ms"}`)
	r.do(t, "POST", "/v2/repository/models/mlp/load", nil, nil)
	var meta modelMetadataJSON
	if code, _ := r.do(t, "GET", "/v2/models/mlp", nil, &meta); code != 200 || strings.Join(meta.Versions, ",") != "1,2" {
		t.Fatalf("metadata with every version: %v", meta.Versions)
	}
	if code, _ := r.do(t, "POST", "/v2/models/mlp/versions/1/infer", inferBody(rows(0, 1), false, nil), nil); code != 200 {
		t.Fatalf("version 1 by name: %d", code)
	}

	tr.put(t, "broken", "1", "not a seed")
	if code, body := r.do(t, "POST", "/v2/repository/models/broken/load", nil, nil); code != 400 || !strings.Contains(string(body), "not a seed") {
		t.Fatalf("a model that does not load: %d %s", code, body)
	}
	if got := index(); !strings.Contains(got, "broken 1 UNAVAILABLE version 1:") && !strings.Contains(got, "broken 1 UNAVAILABLE") {
		t.Fatalf("index with a broken model: %s", got)
	}
	// Strict readiness: a model that should be served and serves nothing
	// makes the server unready, until it is unloaded.
	if code, _ := r.do(t, "GET", "/v2/health/ready", nil, nil); code != 503 {
		t.Fatalf("readiness with a model serving nothing: %d", code)
	}
	if code, body := r.do(t, "POST", "/v2/repository/models/broken/unload", nil, nil); code != 200 {
		t.Fatalf("unload broken: %d %s", code, body)
	}
	if code, _ := r.do(t, "GET", "/v2/health/ready", nil, nil); code != 200 {
		t.Fatalf("readiness once the broken model is unloaded: %d", code)
	}
	// The repository extension over gRPC, Triton's methods.
	idx, err := r.grpc.RepositoryIndex(t.Context(), &pb.RepositoryIndexRequest{Ready: true})
	if err != nil || len(idx.GetModels()) != 2 || idx.GetModels()[0].GetState() != "READY" {
		t.Fatalf("gRPC index: %v, %v", idx, err)
	}
	if _, err := r.grpc.RepositoryModelLoad(t.Context(), &pb.RepositoryModelLoadRequest{ModelName: "mlp"}); err != nil {
		t.Fatalf("gRPC load: %v", err)
	}
	if _, err := r.grpc.RepositoryModelLoad(t.Context(), &pb.RepositoryModelLoadRequest{ModelName: "../x"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("gRPC load of a path: %v", err)
	}
	if _, err := r.grpc.RepositoryModelUnload(t.Context(), &pb.RepositoryModelUnloadRequest{ModelName: "mlp"}); err != nil {
		t.Fatalf("gRPC unload: %v", err)
	}
	if code, _ := r.do(t, "POST", "/v2/repository/models/mlp/unload", nil, nil); code != 404 {
		t.Fatal("unload of an unloaded model")
	}
	if code, _ := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 1), false, nil), nil); code != 404 {
		t.Fatalf("infer after unload: %d", code)
	}
	for _, bad := range []string{"..%2F..%2Fetc", ".hidden", "none"} {
		if code, _ := r.do(t, "POST", "/v2/repository/models/"+bad+"/load", nil, nil); code != 400 && code != 404 {
			t.Errorf("load %s: %d", bad, code)
		}
	}
}

// A version replaced under load fails no request: closed-loop clients
// over REST and gRPC go on while the polled folder gets version 2, then
// version 3 (the policy serves the latest), and each old version answers
// what it has before its sessions shut down, exactly once.
func TestRepositoryHotReloadUnderLoad(t *testing.T) {
	tr := newTestRepository(t)
	tr.put(t, "mlp", "1", "11")
	r := startServer(t, nil, WithRepository(tr.repository(t, 20*time.Millisecond)))
	<-r.srv.Ready()
	if code, body := r.do(t, "POST", "/v2/repository/models/mlp/load", nil, nil); code != 400 || !strings.Contains(string(body), "polled") {
		t.Fatalf("load in polling mode: %d %s", code, body)
	}
	load := closedLoop(t, r)
	seen := &load.versions
	waitFor := func(v string) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, found := seen.Load(v); found {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("version %s never answered", v)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("1")
	tr.put(t, "mlp", "2", "22")
	waitFor("2")
	tr.put(t, "mlp", "3", "33")
	waitFor("3")
	os.RemoveAll(filepath.Join(tr.dir, "mlp", "1"))
	time.Sleep(100 * time.Millisecond)
	ok, failed := load.stop()
	if err := r.shutdown(); err != nil {
		t.Fatal(err)
	}
	starts, shutdowns := tr.dev.starts.Load(), tr.dev.shutdowns.Load()
	t.Logf("%d requests answered, %d failed; %d sessions started, %d shut down", ok, failed, starts, shutdowns)
	if failed != 0 || ok == 0 || starts < 3 || starts != shutdowns {
		t.Fatalf("%d answered, %d failed; sessions %d started, %d shut down", ok, failed, starts, shutdowns)
	}
}

// load is closed-loop clients of model "mlp", two over REST and two over
// gRPC, each sending its next request when its last is answered; a
// request that fails fails the test.
type load struct {
	versions  sync.Map // the versions that answered
	ok, fails atomic.Int64
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func closedLoop(t *testing.T, r *running) *load {
	ctx, cancel := context.WithCancel(t.Context())
	l := &load{cancel: cancel}
	for i := range 4 {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				var v string
				var err error
				if i%2 == 0 {
					var out restResponse
					code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(i, 3), false, nil), &out)
					if code != 200 {
						err = fmt.Errorf("%d %s", code, body)
					}
					v = out.ModelVersion
				} else {
					resp, gerr := r.grpc.ModelInfer(ctx, grpcRows("mlp", rows(i, 3)))
					if ctx.Err() != nil {
						return
					}
					err, v = gerr, resp.GetModelVersion()
				}
				if err != nil {
					l.fails.Add(1)
					t.Errorf("a request failed: %v", err)
					continue
				}
				l.ok.Add(1)
				l.versions.Store(v, true)
			}
		})
	}
	return l
}

// stop ends the clients and returns the requests answered and failed.
func (l *load) stop() (ok, failed int64) {
	l.cancel()
	l.wg.Wait()
	return l.ok.Load(), l.fails.Load()
}

// sharedCounts counts its sessions on the repository's counters, whatever
// version it is.
type sharedCounts struct {
	device.Model
	total *counted
}

func (c sharedCounts) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	s, err := c.Model.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.total.starts.Add(1)
	c.total.live.Add(1)
	return &countedSession{Session: s, c: c.total}, nil
}

// A repository model that fails to load at start fails Run (Triton's
// --exit-on-error); with WithExitOnError(false) the server starts, serves
// the others, and is not ready while the broken one serves nothing.
func TestRepositoryExitOnError(t *testing.T) {
	tr := newTestRepository(t)
	tr.put(t, "good", "1", "11")
	tr.put(t, "broken", "1", "not a seed")
	srv, err := New(nil, WithRepository(tr.repository(t, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Run(t.Context(), nil, nil); err == nil || !strings.Contains(err.Error(), "model broken") {
		t.Fatalf("Run with a model that does not load: %v", err)
	}
	r := serveTest(t, nil, WithRepository(tr.repository(t, 0)), WithExitOnError(false))
	if code, _ := r.do(t, "POST", "/v2/models/good/infer", inferBody(rows(0, 1), false, nil), nil); code != 200 {
		t.Fatalf("the good model: %d", code)
	}
	if code, _ := r.do(t, "GET", "/v2/health/ready", nil, nil); code != 503 {
		t.Fatalf("readiness with a broken model: %d", code)
	}
	tr.put(t, "broken", "1", "22")
	if code, body := r.do(t, "POST", "/v2/repository/models/broken/load", nil, nil); code != 200 {
		t.Fatalf("load the mended model: %d %s", code, body)
	}
	if code, _ := r.do(t, "GET", "/v2/health/ready", nil, nil); code != 200 {
		t.Fatalf("readiness once every model serves: %d", code)
	}
}
