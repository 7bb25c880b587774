package job

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/aztest"
	"github.com/drainpipe/drainpipe/internal/testing/gcstest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/storage"
)

// lockStores starts the stores the lock is tried on, and returns the
// output URL of each (in a bucket made for it). All honour conditional
// writes; gofakes3 ignores If-Match on a DELETE (a release reads its lock
// first), as MinIO does.
func lockStores(t *testing.T) map[string]string {
	s3 := s3test.Start(t)
	s3.Bucket(t, "locks")
	gcs := gcstest.Start(t)
	gcs.Bucket(t, "locks")
	az := aztest.Start(t)
	az.Container(t, "locks")
	fake := s3test.StartGoFakeS3(t)
	return map[string]string{"s3": s3.URL("locks", "out/"), "gcs": gcs.URL("locks", "out/"), "azure": az.URL("locks", "out/"),
		"gofakes3": fake.URL("locks", "out/")}
}

const staleLock = `{"host":"worker-7","pid":4242,"started":"2026-11-30T10:00:00Z","token":"dead"}`

// Two jobs breaking one dead lock at once: the take-over is a write
// conditional on the version both read, so exactly one holds the lock and
// the other is told another job took it first (or, where the store's
// condition races, finds at its first check that it lost); the winner's
// release leaves no lock.
func TestTwoBreakersOneWins(t *testing.T) {
	for name, output := range lockStores(t) {
		t.Run(name, func(t *testing.T) {
			store := storage.NewOpener()
			defer store.Close()
			lockName := strings.Replace(output, "/out/", "/.out.lock", 1)
			for round := range 4 {
				if err := store.WriteFile(t.Context(), lockName, []byte(staleLock), true); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				held := make([]locker, 2)
				errs := make([]error, 2)
				for i := range 2 {
					wg.Go(func() { held[i], errs[i] = lockOutput(t.Context(), t.Context(), store, output, true) })
				}
				wg.Wait()
				var winners []locker
				for i, err := range errs {
					switch {
					case err == nil:
						winners = append(winners, held[i])
					case !errors.Is(err, ErrLocked):
						t.Fatalf("round %d: breaker %d: %v", round, i, err)
					}
				}
				// A store whose conditional write races (the GCS emulator's,
				// at times) may tell both they won; the check before every
				// commit then leaves exactly one holding it.
				var holders []locker
				for _, w := range winners {
					if w.check() == nil {
						holders = append(holders, w)
					}
				}
				if len(holders) != 1 {
					t.Fatalf("round %d: %d breakers hold the lock (%v), want 1", round, len(holders), errs)
				}
				if len(winners) > 1 {
					t.Logf("round %d: both breakers were told they won; one found it lost at its check", round)
				}
				if err := holders[0].release(t.Context()); err != nil {
					t.Fatalf("round %d: release: %v", round, err)
				}
				if _, err := store.Stat(t.Context(), lockName); !errors.Is(err, storage.ErrNotFound) {
					t.Fatalf("round %d: the lock after its release: %v", round, err)
				}
			}
		})
	}
}

// A lock whose write's answer is lost (the SDK retries and is refused by
// the lock its first try made) is recognised as the job's own by its
// token, not reported as another job's; a release that fails is an
// error, never silence that blocks every later run.
func TestLockLostAnswerAndFailedRelease(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "locks")
	proxy := srv.Proxy(t)
	store := storage.NewOpener()
	defer store.Close()
	output := proxy.URL("locks", "out/")

	proxy.Lock()
	proxy.DropAnswers = s3test.FirstAnswer("PUT", "/.out.lock")
	proxy.Unlock()
	l, err := lockOutput(t.Context(), t.Context(), store, output, false)
	if err != nil {
		t.Fatalf("a lock whose answer was lost: %v", err)
	}
	if err := l.release(t.Context()); err != nil {
		t.Fatal(err)
	}

	proxy.Lock()
	proxy.DropAnswers = s3test.FirstAnswer("PUT", "/.out.lock")
	proxy.Unlock()
	held, err := lockOutput(t.Context(), t.Context(), store, proxy.URL("locks", "out/"), false)
	if err != nil {
		t.Fatal(err)
	}
	// Taken over by a breaker while held: the holder's check and release
	// say so, and the release leaves the breaker's lock alone.
	other := storage.NewOpener()
	defer other.Close()
	breaker, err := lockOutput(t.Context(), t.Context(), other, output, true)
	if err != nil {
		t.Fatalf("breaking a held lock: %v", err)
	}
	if err := held.check(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("the holder's check after a take-over: %v, want ErrLockLost", err)
	}
	if err := held.release(t.Context()); !errors.Is(err, ErrLockLost) || !errors.Is(err, ErrLockRelease) {
		t.Fatalf("the holder's release after a take-over: %v, want ErrLockRelease and ErrLockLost", err)
	}
	l, err = lockOutput(t.Context(), t.Context(), store, output, false)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("a third job while the breaker holds the lock: %v, want ErrLocked (the holder's release left it)", err)
	}
	proxy.Lock()
	proxy.FailDeletes = true
	proxy.Unlock()
	if err := breaker.release(t.Context()); !errors.Is(err, ErrLockRelease) {
		t.Fatalf("a release the store refuses: %v, want ErrLockRelease", err)
	}
	proxy.Lock()
	proxy.FailDeletes = false
	proxy.Unlock()
	if err := breaker.release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
