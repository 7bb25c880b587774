package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A repository in explicit mode whose polls the test makes itself
// (syncAll with polled set), one at a time, so each rule is seen at the
// poll it applies to.
func stepRepository(t *testing.T) (*testRepository, *running, *atomic.Int64) {
	tr := newTestRepository(t)
	tr.put(t, "mlp", "1", "11")
	repo := tr.repository(t, 0)
	loads := &atomic.Int64{}
	load := repo.Load
	repo.Load = func(ctx context.Context, path string) (ModelSpec, error) {
		loads.Add(1)
		return load(ctx, path)
	}
	r := serveTest(t, nil, WithRepository(repo))
	return tr, r, loads
}

func (r *running) poll(t *testing.T) {
	t.Helper()
	r.srv.repo.syncAll(t.Context(), true)
}

// servedVersion answers a request and returns the version that answered;
// any failure fails the test: the served version never goes away.
func (r *running) servedVersion(t *testing.T) string {
	t.Helper()
	var out restResponse
	if code, body := r.do(t, "POST", "/v2/models/mlp/infer", inferBody(rows(0, 2), false, nil), &out); code != 200 {
		t.Fatalf("infer: %d %s", code, body)
	}
	return out.ModelVersion
}

func (r *running) indexText(t *testing.T) string {
	t.Helper()
	var out []indexEntry
	if code, body := r.do(t, "POST", "/v2/repository/index", nil, &out); code != 200 {
		t.Fatalf("index: %d %s", code, body)
	}
	var s []string
	for _, e := range out {
		s = append(s, strings.TrimRight(e.Name+" "+e.Version+" "+e.State+" "+e.Reason, " "))
	}
	return strings.Join(s, "; ")
}

// A new version that fails to load — a damaged file, a config over the
// bounds, a FIFO, a link to /dev/zero — never retires the version being
// served: it answers throughout, and the failure is in the index with its
// reason; an unchanged file that failed is not read again; once a good
// version lands, it replaces the old.
func TestRepositoryKeepsWhatItServes(t *testing.T) {
	tr, r, loads := stepRepository(t)
	dir := filepath.Join(tr.dir, "mlp")
	if v := r.servedVersion(t); v != "1" {
		t.Fatalf("at start: version %s", v)
	}
	load := closedLoop(t, r) // closed-loop clients, all through the faults
	faults := []struct {
		name  string
		make  func()
		undo  func()
		index string
	}{
		{"a damaged file", func() { tr.put(t, "mlp", "2", "not a seed") }, func() { os.RemoveAll(filepath.Join(dir, "2")) }, "mlp 2 UNAVAILABLE " + filepath.Join(dir, "2", "model.seed") + ": not a seed"},
		{"a FIFO", func() {
			os.MkdirAll(filepath.Join(dir, "3"), 0o755)
			if err := syscall.Mkfifo(filepath.Join(dir, "3", "model.seed"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func() { os.RemoveAll(filepath.Join(dir, "3")) }, "not a regular file"},
		{"a link to /dev/zero", func() {
			os.MkdirAll(filepath.Join(dir, "4"), 0o755)
			if err := os.Symlink("/dev/zero", filepath.Join(dir, "4", "model.seed")); err != nil {
				t.Fatal(err)
			}
		}, func() { os.RemoveAll(filepath.Join(dir, "4")) }, "not a regular file"},
		{"a config over the bounds", func() {
			tr.put(t, "mlp", "5", "55")
			writeFile(t, filepath.Join(dir, "config.json"), `{"batch_sizes": [1, 1000000000]}`)
		}, func() { os.Remove(filepath.Join(dir, "config.json")); os.RemoveAll(filepath.Join(dir, "5")) }, "batch_sizes: 1000000000"},
	}
	for _, f := range faults {
		f.make()
		for range 3 {
			done := make(chan struct{})
			go func() { r.poll(t); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: a poll did not end", f.name)
			}
			if v := r.servedVersion(t); v != "1" {
				t.Fatalf("%s: version %s answered, want 1 kept", f.name, v)
			}
		}
		if got := r.indexText(t); !strings.Contains(got, "mlp 1 READY") || !strings.Contains(got, f.index) {
			t.Fatalf("%s: index %q, want version 1 ready and %q", f.name, got, f.index)
		}
		f.undo()
		r.poll(t)
	}
	ok, failed := load.stop()
	t.Logf("%d requests answered through the faults, %d failed", ok, failed)
	if failed != 0 || ok == 0 {
		t.Fatalf("%d requests answered, %d failed", ok, failed)
	}
	if _, other := load.versions.Load("2"); other {
		t.Fatal("a version that did not load answered")
	}
	// The damaged file is read once, not every poll.
	before := loads.Load()
	tr.put(t, "mlp", "2", "not a seed")
	r.poll(t)
	r.poll(t)
	r.poll(t)
	if n := loads.Load() - before; n != 1 {
		t.Fatalf("an unchanged damaged file was read %d times, want once", n)
	}
	// A good version replaces the old one.
	tr.put(t, "mlp", "6", "66")
	r.poll(t)
	r.poll(t)
	if v := r.servedVersion(t); v != "6" {
		t.Fatalf("after a good version 6: version %s answers; index %s", v, r.indexText(t))
	}
	if got := r.indexText(t); got != "mlp 6 READY" {
		t.Fatalf("index once version 6 serves: %s", got)
	}
}

// What a version folder may hold: a model file of one of the names the
// formats define (model.json and a copy's model.seed.part are not
// models); a file still being written (size or time changed since the
// previous poll) loads only once two polls agree; folder names other than
// positive integers without leading zeros are passed over with a warning;
// a version folder that is a link is followed; an edited config.json
// applies without a new model file.
func TestRepositoryFolderRules(t *testing.T) {
	tr, r, _ := stepRepository(t)
	dir := filepath.Join(tr.dir, "mlp")
	for _, stray := range []string{"model.json", "model.seed.part", "model.seed.tmp"} {
		os.MkdirAll(filepath.Join(dir, "7"), 0o755)
		writeFile(t, filepath.Join(dir, "7", stray), "77")
	}
	for _, name := range []string{"0", "01", "123456789012345678901", "v2"} {
		tr.put(t, "mlp", name, "99")
	}
	r.poll(t)
	r.poll(t)
	if v := r.servedVersion(t); v != "1" {
		t.Fatalf("stray files and folders: version %s answers, want 1", v)
	}
	// A file written in two steps, a poll between them: not loaded half
	// written.
	os.MkdirAll(filepath.Join(dir, "8"), 0o755)
	writeFile(t, filepath.Join(dir, "8", "model.seed"), "8")
	r.poll(t)
	if v := r.servedVersion(t); v != "1" {
		t.Fatalf("a file seen once: version %s answers, want 1", v)
	}
	writeFile(t, filepath.Join(dir, "8", "model.seed"), "88")
	os.Chtimes(filepath.Join(dir, "8", "model.seed"), time.Now(), time.Now().Add(time.Second))
	r.poll(t)
	if v := r.servedVersion(t); v != "1" {
		t.Fatalf("a file changed since the last poll: version %s answers, want 1", v)
	}
	r.poll(t)
	if v := r.servedVersion(t); v != "8" {
		t.Fatalf("a file two polls agree on: version %s answers, want 8", v)
	}
	// A linked version folder.
	target := filepath.Join(t.TempDir(), "release")
	os.MkdirAll(target, 0o755)
	writeFile(t, filepath.Join(target, "model.seed"), "9")
	if err := os.Symlink(target, filepath.Join(dir, "9")); err != nil {
		t.Fatal(err)
	}
	r.poll(t)
	r.poll(t)
	if v := r.servedVersion(t); v != "9" {
		t.Fatalf("a linked version folder: version %s answers, want 9", v)
	}
	// An edited config.json reloads the version with it.
	writeFile(t, filepath.Join(dir, "config.json"), `{"batch_sizes": [4]}`)
	r.poll(t)
	r.poll(t)
	m, ok := r.srv.reg.find("mlp", "9", false)
	if !ok || !strings.Contains(m.source.config, `"batch_sizes": [4]`) {
		t.Fatalf("an edited config.json is not applied: %+v", m)
	}
}
