package fileset

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// Chunks closer than the gap become one request; farther ones stay apart;
// order and overlap do not matter.
func TestCoalesce(t *testing.T) {
	got := coalesce([]byteRange{{5000, 100}, {0, 1000}, {1000, 4000}, {10_000_000, 10}, {4500, 100}})
	want := []byteRange{{0, 5100}, {10_000_000, 10}}
	if !slices.Equal(got, want) {
		t.Fatalf("coalesce: %v, want %v", got, want)
	}
}

// The fetches ahead count against the read's memory ceiling: under a
// ceiling that fits some spans (or none), the prefetcher holds no more
// than it, every read returns the file's bytes (from the object, past
// what fits), and Close gives back what it took.
func TestPrefetchUnderTheCeiling(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.parquet")
	w, err := sink.Create(path, dataset.TensorSchema(64), sink.WithRowGroupRows(4096))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.UniformTensors(memory.NewGoAllocator(), 40_000, 64, 4096, 1).Records()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{1, 3 << 20, 1 << 30} {
		o := storage.NewOpener()
		f, err := o.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		c := &ceiling{mem: memory.NewGoAllocator(), limit: limit}
		p := newPrefetcher(t.Context(), f, c)
		pf, err := file.NewParquetReader(p)
		if err != nil {
			t.Fatal(err)
		}
		groups := make([]int, pf.NumRowGroups())
		for g := range groups {
			groups[g] = g
		}
		p.plan(pf, groups, nil, 4096)
		for _, g := range groups {
			for _, s := range p.spans[g] {
				for off := s.off; off < s.off+s.n; off += 100_000 {
					got := make([]byte, min(100_000, s.off+s.n-off))
					if _, err := p.ReadAt(got, off); err != nil || !bytes.Equal(got, want[off:off+int64(len(got))]) {
						t.Fatalf("ceiling %d: bytes %d+%d differ from the file's (%v)", limit, off, len(got), err)
					}
					if held := c.held.Load(); held > limit {
						t.Fatalf("ceiling %d: %d bytes held", limit, held)
					}
				}
			}
		}
		if limit == 1 && p.taken != 0 {
			t.Fatalf("a ceiling of one byte: %d taken", p.taken)
		}
		if limit == 1<<30 && p.taken == 0 {
			t.Fatal("nothing fetched ahead under a ceiling of 1 GiB")
		}
		pf.Close()
		if held := c.held.Load(); held != 0 {
			t.Fatalf("ceiling %d: %d bytes held after Close", limit, held)
		}
		o.Close()
	}
}
