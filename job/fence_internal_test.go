package job

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/storage"
)

// The manifest is the fencing token: a run whose output another run took
// over between its lock check and its commit (the check passed, here:
// no fence) fails at that commit with ErrLockLost, and so does its seal;
// the other run commits and seals, its final manifest without a count of
// writes. On every store here (gofakes3 ignores If-Match on reads, not on
// writes); on a store that ignored it on writes too, the read-back after
// each write and the lock's check before each commit would be all there
// is, and this window would not be caught.
func TestManifestFencesATakenOverRun(t *testing.T) {
	for name, output := range lockStores(t) {
		t.Run(name, func(t *testing.T) {
			store := storage.NewOpener()
			defer store.Close()
			l := layout{dir: output, folder: true, store: store, ctx: t.Context(), live: t.Context()}
			a, err := openParts(l, "job", 10, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.add(part{InEnd: 10}); err != nil {
				t.Fatal(err)
			}
			b, err := openParts(l, "job", 10, true, false) // the breaker, resuming
			if err != nil {
				t.Fatal(err)
			}
			if b.inEnd() != 10 {
				t.Fatalf("the breaker resumes at %d, want 10", b.inEnd())
			}
			if err := a.add(part{InEnd: 20}); !errors.Is(err, ErrLockLost) {
				t.Fatalf("the first run's commit after a take-over: %v, want ErrLockLost", err)
			}
			if err := b.add(part{InEnd: 20}); err != nil {
				t.Fatalf("the breaker's commit: %v", err)
			}
			empty := func() (*arrow.Schema, error) {
				return arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil), nil
			}
			mem := arrowtest.Allocator(t)
			if err := b.seal(empty, mem); err != nil {
				t.Fatalf("the breaker's seal: %v", err)
			}
			if err := a.seal(empty, mem); !errors.Is(err, ErrLockLost) {
				t.Fatalf("the first run's seal after the breaker's: %v, want ErrLockLost", err)
			}
			data, _, err := l.readManifest()
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(data, []byte(`"writes"`)) {
				t.Fatalf("the final manifest counts its writes: %s", data)
			}
		})
	}
}
