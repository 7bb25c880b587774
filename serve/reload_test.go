package serve

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A reload that takes long (a download, a warm-up) does not hold up
// readiness or the index: while version 2's load is held, indefinitely
// here, /v2/health/ready answers 200 and the index lists version 1
// READY, each within a Kubernetes probe's default timeout of 1 s (they
// took 4.7 ms at most when measured; before, they waited for the load),
// and version 1 answers every request.
func TestReloadKeepsReadiness(t *testing.T) {
	tr := newTestRepository(t)
	tr.put(t, "mlp", "1", "11")
	repo := tr.repository(t, 0)
	loading, release := make(chan struct{}), make(chan struct{})
	load := repo.Load
	repo.Load = func(ctx context.Context, path string) (ModelSpec, error) {
		if strings.Contains(path, "/2/") {
			close(loading)
			select {
			case <-release:
			case <-ctx.Done():
				return ModelSpec{}, ctx.Err()
			}
		}
		return load(ctx, path)
	}
	r := serveTest(t, nil, WithRepository(repo))
	tr.put(t, "mlp", "2", "22")
	loaded := make(chan int, 1)
	go func() {
		resp, err := r.http.Post(r.url+"/v2/repository/models/mlp/load", "application/json", nil)
		if err != nil {
			loaded <- 0
			return
		}
		resp.Body.Close()
		loaded <- resp.StatusCode
	}()
	<-loading
	probe := &http.Client{Timeout: time.Second}
	var slowest time.Duration
	for range 50 {
		began := time.Now()
		resp, err := probe.Get(r.url + "/v2/health/ready")
		if err != nil {
			t.Fatalf("readiness during a load: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("readiness during a load: %d", resp.StatusCode)
		}
		slowest = max(slowest, time.Since(began))
		began = time.Now()
		idx, err := probe.Post(r.url+"/v2/repository/index", "application/json", nil)
		if err != nil {
			t.Fatalf("the index during a load: %v", err)
		}
		idx.Body.Close()
		slowest = max(slowest, time.Since(began))
		if got := r.indexText(t); got != "mlp 1 READY" {
			t.Fatalf("the index during a load: %s", got)
		}
		if v := r.servedVersion(t); v != "1" {
			t.Fatalf("version %s answered during the load, want 1", v)
		}
	}
	t.Logf("readiness and the index during a load: %s at most", slowest)
	close(release)
	if code := <-loaded; code != 200 {
		t.Fatalf("the load: %d", code)
	}
	if got := r.indexText(t); got != "mlp 2 READY" {
		t.Fatalf("after the load: %s", got)
	}
}
