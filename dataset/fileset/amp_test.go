package fileset_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/internal/s3test"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// An object is fetched once, whatever the rows a read takes: a read that
// spans row groups takes its columns one after another, each across the
// groups, and the groups the later columns still need are kept (before,
// reads of 16,384 rows over groups of 8,192 fetched 1.49 times the
// object, of 65,536 rows 1.90 times). One request looks at the object
// (its pin); the rest fetch bytes. A memory ceiling the fetches ahead do
// not fit under reads every row all the same, from the object as asked.
func TestObjectFetchedOnce(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "once")
	const rows = 100_000
	w, err := sink.Create(filepath.Join(bucket, "in.parquet"), dataset.TensorSchema(64), sink.WithRowGroupRows(8192))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.UniformTensors(memory.NewGoAllocator(), rows, 64, 8192, 1).Records()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		readRows  int
		maxMemory int64
		most      float64 // bytes fetched ÷ size
	}{{1000, 0, 1.01}, {8192, 0, 1.01}, {16384, 0, 1.01}, {65536, 0, 1.01}, {16384, 48 << 20, 1.01}} {
		t.Run(fmt.Sprintf("read %d, ceiling %d", c.readRows, c.maxMemory), func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			o := storage.NewOpener()
			defer o.Close()
			opts := []fileset.Option{fileset.WithReadRows(c.readRows), fileset.WithOpener(o), fileset.WithAllocator(mem)}
			if c.maxMemory > 0 {
				opts = append(opts, fileset.WithMaxMemory(c.maxMemory))
			}
			ds, err := fileset.Read([]string{srv.URL("once", "in.parquet")}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			next := int64(0)
			for rec, err := range ds.Records() {
				if err != nil {
					t.Fatal(err)
				}
				ids := rec.Column(0).(*array.Int64)
				for i := range ids.Len() {
					if ids.Value(i) != next {
						t.Fatalf("row %d holds id %d", next, ids.Value(i))
					}
					next++
				}
			}
			if next != rows {
				t.Fatalf("%d rows, want %d", next, rows)
			}
			for _, tr := range o.Traffic() {
				ratio := float64(tr.Bytes) / float64(tr.Size)
				t.Logf("%d requests, %.4f of the object fetched", tr.Requests, ratio)
				if ratio > c.most {
					t.Fatalf("%.3f of the object fetched, want at most %.2f", ratio, c.most)
				}
			}
		})
	}
}
