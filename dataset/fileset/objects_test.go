package fileset_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// Files on an S3-compatible server (VersityGW, started for the test) read
// as the same files on local disk: every format, globs in the key, column
// projection; a missing object or bucket is an error naming its URL.
func TestReadFromS3(t *testing.T) {
	srv := s3test.Start(t)
	dir := srv.Bucket(t, "inputs")
	corpus := filepath.Join("testdata", "writers", "files")
	names := []string{"duckdb-list.parquet", "arrowrs-fixed-nulls.parquet", "hyparquet-list-irregular.parquet",
		"arrowjs-fixed.arrow", "arrowjs-list.arrows"}
	for _, name := range names {
		data := arrowtest.ReadFile(t, filepath.Join(corpus, name))
		if err := os.MkdirAll(filepath.Join(dir, "corpus"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "corpus", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	csv := "id,f0,f1\n1,0.5,1\n2,0.25,2\n3,x,3\n"
	if err := os.WriteFile(filepath.Join(dir, "small.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		for _, opts := range [][]fileset.Option{nil, {fileset.WithColumns("v")}, {fileset.WithReadRows(300)}} {
			mem := arrowtest.Allocator(t)
			local, _, lerr := readColumns(t, mem, filepath.Join(corpus, name), opts...)
			remote, rows, rerr := readColumns(t, mem, srv.URL("inputs", "corpus/"+name), opts...)
			if lerr != nil || rerr != nil || len(local) != len(remote) {
				t.Fatalf("%s: local %v, S3 %v, %d and %d columns", name, lerr, rerr, len(local), len(remote))
			}
			for i := range local {
				if !array.ApproxEqual(local[i], remote[i], array.WithNaNsEqual(true), array.WithAbsTolerance(0)) {
					t.Fatalf("%s: column %d read from S3 differs from the local read (%d rows)", name, i, rows)
				}
			}
			releaseAll(local)
			releaseAll(remote)
		}
	}
	// A glob in the key lists the bucket; * stays within a folder.
	got, err := fileset.Expand([]string{srv.URL("inputs", "corpus/*.parquet"), srv.URL("inputs", "*.csv")})
	if err != nil || len(got) != 4 || !strings.Contains(got[0], "s3://inputs/corpus/arrowrs-fixed-nulls.parquet?") {
		t.Fatalf("expand: %v, %v", got, err)
	}
	// ** spans folders; a folder (a key ending in /) names its data files.
	if got, err := fileset.Expand([]string{srv.URL("inputs", "**/*.arrow*")}); err != nil || len(got) != 2 {
		t.Fatalf("expand **: %v, %v", got, err)
	}
	if got, err := fileset.Expand([]string{srv.URL("inputs", "corpus/")}); err != nil || len(got) != len(names) {
		t.Fatalf("expand a folder: %v, %v", got, err)
	}
	rows, err := fileset.Rows([]string{srv.URL("inputs", "corpus/duckdb-*.parquet")})
	if err != nil || rows != 10000 {
		t.Fatalf("declared rows %d, %v", rows, err)
	}
	// CSV streams, with its bad value named by line.
	ds, err := fileset.Read([]string{srv.URL("inputs", "small.csv")}, fileset.WithCSVNumbers("f*"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Count(); !errors.Is(err, fileset.ErrCSVValue) || !strings.Contains(err.Error(), `line 4, column "f0"`) {
		t.Fatalf("CSV from S3: %v", err)
	}
	for _, bad := range []string{srv.URL("inputs", "nope.parquet"), srv.URL("inputs", "corpus/*.csv"), srv.URL("nobucket", "a.parquet")} {
		_, err := fileset.Read([]string{bad})
		if err == nil || !strings.Contains(err.Error(), "s3://") || strings.Contains(err.Error(), s3test.SecretKey) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
	if _, err := fileset.Read([]string{srv.URL("inputs", "nope.parquet")}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a missing object: %v", err)
	}
}

// Objects are planned side by side: opening 40 of them, each request 20 ms
// away, keeps many requests under way at once instead of one (their
// round trips, not their bytes, are the time), and the set reads every
// row of every object.
func TestObjectsPlannedSideBySide(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "many")
	const files, rows = 40, 50
	for i := range files {
		w, err := sink.Create(filepath.Join(bucket, fmt.Sprintf("in-%03d.parquet", i)), dataset.TensorSchema(4))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Copy(w, dataset.UniformTensors(memory.NewGoAllocator(), rows, 4, rows, uint64(i)).Records()); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	proxy := srv.Proxy(t)
	proxy.Lock()
	proxy.Latency = 20 * time.Millisecond
	proxy.Unlock()
	began := time.Now()
	set, err := fileset.Open([]string{proxy.URL("many", "in-*.parquet")})
	if err != nil {
		t.Fatal(err)
	}
	planned := time.Since(began)
	proxy.Lock()
	most := proxy.MaxInFlight
	proxy.Unlock()
	t.Logf("%d objects planned in %v, %d requests at most under way", files, planned.Round(time.Millisecond), most)
	if most < 8 {
		t.Fatalf("at most %d requests under way while planning %d objects: one at a time", most, files)
	}
	if n := set.DeclaredRows(); n != files*rows {
		t.Fatalf("%d rows declared, want %d", n, files*rows)
	}
}

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

// An object costs three requests, and one more a further row group: a
// look that pins it, one fetch of its tail for the footer, which the
// reads after planning take from the plan, and a fetch a row group.
func TestObjectRequests(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.Bucket(t, "requests")
	for _, c := range []struct {
		rows, groupRows int
		requests        int64
	}{{1000, 1000, 3}, {20_000, 8192, 5}} {
		name := fmt.Sprintf("in-%d.parquet", c.rows)
		w, err := sink.Create(filepath.Join(bucket, name), dataset.TensorSchema(64), sink.WithRowGroupRows(int64(c.groupRows)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Copy(w, dataset.UniformTensors(memory.NewGoAllocator(), c.rows, 64, c.groupRows, 1).Records()); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		o := storage.NewOpener()
		defer o.Close()
		mem := arrowtest.Allocator(t)
		ds, err := fileset.Read([]string{srv.URL("requests", name)}, fileset.WithOpener(o), fileset.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := ds.Count(); err != nil || n != int64(c.rows) {
			t.Fatalf("%s: %d rows, %v", name, n, err)
		}
		for _, tr := range o.Traffic() {
			if tr.Requests != c.requests || tr.Bytes > tr.Size {
				t.Errorf("%s: %+v, want %d requests", name, tr, c.requests)
			}
		}
	}
}
