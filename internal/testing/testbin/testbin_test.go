package testbin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Test binaries of several packages ask for one server at once: one makes
// it, the others wait for it and find it made.
func TestCachedMakesOnce(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	synctest.Test(t, func(t *testing.T) {
		var makes atomic.Int32
		gate := make(chan struct{})
		install := func(tmp string) error {
			makes.Add(1)
			<-gate
			return os.WriteFile(filepath.Join(tmp, "server"), []byte("bin"), 0o755)
		}
		var wg sync.WaitGroup
		dirs := make([]string, 4)
		for i := range dirs {
			wg.Go(func() {
				dir, err := cached(t.Context(), "server-v1", "server", install)
				if err != nil {
					t.Error(err)
				}
				dirs[i] = dir
			})
		}
		synctest.Wait() // one makes it, the others wait on the lock
		if n := makes.Load(); n != 1 {
			t.Fatalf("%d makes under way at once, want 1", n)
		}
		close(gate)
		wg.Wait()
		if n := makes.Load(); n != 1 {
			t.Fatalf("made %d times, want once", n)
		}
		for _, dir := range dirs {
			if dir != filepath.Join(Folder(), "server-v1") {
				t.Fatalf("dir %q, want %q", dir, filepath.Join(Folder(), "server-v1"))
			}
		}
	})
	if _, err := os.Stat(filepath.Join(Folder(), "server-v1", "server")); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(Folder(), "*.make-*"))
	if len(left) > 0 {
		t.Fatalf("left %v", left)
	}
}

// A failed or killed make leaves nothing that looks made, and the next
// one starts clean.
func TestCachedFailureLeavesNothing(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	boom := errors.New("boom")
	_, err := cached(t.Context(), "server-v1", "server", func(tmp string) error {
		os.WriteFile(filepath.Join(tmp, "half"), nil, 0o644)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if _, err := os.Stat(filepath.Join(Folder(), "server-v1")); !os.IsNotExist(err) {
		t.Fatalf("a failed make left its folder: %v", err)
	}
	// What a killed maker leaves behind.
	stale := filepath.Join(Folder(), "server-v1.make-123")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := cached(t.Context(), "server-v1", "server", func(tmp string) error {
		if _, err := os.Stat(filepath.Join(tmp, "half")); err == nil {
			t.Error("the new make sees the failed one's files")
		}
		return os.WriteFile(filepath.Join(tmp, "server"), nil, 0o755)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "server")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale make stayed: %v", err)
	}
}

// A test waiting for another process's build stops waiting when its
// context ends, with the context's cause.
func TestCachedWaitEndsWithContext(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if err := os.MkdirAll(Folder(), 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err := lock(t.Context(), filepath.Join(Folder(), "server-v1.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := cached(ctx, "server-v1", "server", func(string) error {
			t.Error("made while another holds the lock")
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the deadline", err)
		}
	})
}

type tests func() int

func (f tests) Run() int { return f() }

// Run returns the tests' code, after the builds no test waited for have
// stopped.
func TestPrepareStopsBuildsAfterTheTests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stopped atomic.Bool
		build := func(ctx context.Context) error {
			<-ctx.Done()
			stopped.Store(true)
			return ctx.Err()
		}
		done := func(context.Context) error { return nil }
		p := Prepare(tests(func() int {
			if testing.Short() {
				return 3
			}
			synctest.Wait()
			if stopped.Load() {
				t.Error("a build stopped while the tests ran")
			}
			return 3
		}), build, done)
		if code := p.Run(); code != 3 {
			t.Fatalf("code %d, want the tests' 3", code)
		}
		if !testing.Short() && !stopped.Load() {
			t.Fatal("Run returned before the build stopped")
		}
	})
}
