package serve

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/storage"
)

// A repository on object storage (an S3 server on loopback): its models
// found by listing, config.pbtxt honoured, a new version loaded when the
// poll lists it (once two polls agree), a removed one unloaded.
func TestRepositoryOnS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "models")
	store := storage.NewOpener()
	defer store.Close()
	ctx := t.Context()
	put := func(key, content string) {
		t.Helper()
		if err := store.WriteFile(ctx, srv.URL("models", key), []byte(content), true); err != nil {
			t.Fatal(err)
		}
	}
	put("repo/classifier/config.pbtxt", "max_batch_size: 4\ninstance_group [ { count: 1 kind: KIND_CPU } ]\n")
	put("repo/classifier/1/model.seed", "7")
	put("repo/.hidden/1/model.seed", "7")
	mem := arrowtest.Allocator(t)
	repo := Repository{Dir: srv.URL("models", "repo/"), Poll: 20 * time.Millisecond, Files: []string{"model.seed"},
		Load: func(ctx context.Context, path string) (ModelSpec, error) {
			data, err := store.ReadFile(ctx, path)
			if err != nil {
				return ModelSpec{}, err
			}
			seed, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
			if err != nil {
				return ModelSpec{}, err
			}
			m, err := cpu.NewMLP([]int{features, 16, 3}, cpu.ReLU, rand.New(rand.NewPCG(seed, 2)))
			if err != nil {
				return ModelSpec{}, err
			}
			return ModelSpec{Model: m, Input: mlpInput(), Options: []predict.Option{predict.WithBatchSize(256), predict.WithAllocator(mem)},
				Batching: online.Options{MaxDelay: time.Millisecond}}, nil
		}}
	r := serveTest(t, nil, WithRepository(repo))
	waitFor(t, "version 1 served", func() bool { return r.indexText(t) == "classifier 1 READY" })
	if code, body := r.do(t, "POST", "/v2/models/classifier/infer", inferBody(rows(0, 10), false, nil), nil); code != 200 {
		t.Fatalf("infer: %d %s", code, body)
	}
	checkBatchesWithin(t, r, "classifier", 4)
	put("repo/classifier/2/model.seed", "8")
	waitFor(t, "version 2 served", func() bool { return r.indexText(t) == "classifier 2 READY" })
	if err := store.Remove(ctx, srv.URL("models", "repo/classifier/2/model.seed")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "version 1 back", func() bool { return r.indexText(t) == "classifier 1 READY" })
}

// A model file on object storage is loaded at the version its listing
// saw: one replaced between the listing and the read (here by a file of
// the same size, which a size check passes) fails to load, naming the
// change, and the next load takes the new file.
func TestRepositoryLoadsTheVersionListed(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "models")
	store := storage.NewOpener()
	defer store.Close()
	ctx := t.Context()
	key := srv.URL("models", "repo/mlp/1/model.seed")
	if err := store.WriteFile(ctx, key, []byte("7"), true); err != nil {
		t.Fatal(err)
	}
	mem := arrowtest.Allocator(t)
	var replaced atomic.Bool
	repo := Repository{Dir: srv.URL("models", "repo/"), Files: []string{"model.seed"},
		Load: func(context.Context, string) (ModelSpec, error) {
			return ModelSpec{}, errors.New("Load called where LoadPinned is set")
		},
		LoadPinned: func(ctx context.Context, path string, v storage.Info) (ModelSpec, error) {
			if !replaced.Swap(true) {
				if err := store.WriteFile(ctx, path, []byte("8"), true); err != nil {
					return ModelSpec{}, err
				}
			}
			pinned := storage.NewOpener()
			defer pinned.Close()
			pinned.Expect(path, v)
			data, err := pinned.ReadFile(ctx, path)
			if err != nil {
				return ModelSpec{}, err
			}
			seed, err := strconv.ParseUint(string(data), 10, 64)
			if err != nil {
				return ModelSpec{}, err
			}
			m, err := cpu.NewMLP([]int{features, 16, 3}, cpu.ReLU, rand.New(rand.NewPCG(seed, 2)))
			if err != nil {
				return ModelSpec{}, err
			}
			return ModelSpec{Model: m, Input: mlpInput(), Options: []predict.Option{predict.WithBatchSize(8), predict.WithAllocator(mem)}}, nil
		}}
	r := serveTest(t, nil, WithRepository(repo), WithExitOnError(false))
	if got := r.indexText(t); !strings.Contains(got, "mlp 1 UNAVAILABLE") || !strings.Contains(got, "changed") {
		t.Fatalf("a file replaced after its listing: %s", got)
	}
	if code, body := r.do(t, "POST", "/v2/repository/models/mlp/load", nil, nil); code != 200 {
		t.Fatalf("load: %d %s", code, body)
	}
	if got := r.indexText(t); got != "mlp 1 READY" {
		t.Fatalf("the next load: %s", got)
	}
}
