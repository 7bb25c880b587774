package sink_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/tensor"
)

// predictions builds a record like the cpu device's output with keys: a
// non-nullable fixed_size_list with non-nullable elements.
func predictions(t *testing.T, mem interface {
	Allocate(int) []byte
	Reallocate(int, []byte) []byte
	Free([]byte)
}, rows int) arrow.Record {
	t.Helper()
	ids := array.NewInt64Builder(mem)
	defer ids.Release()
	buf, v := tensor.NewBuffer(mem, rows*3)
	for i := range rows {
		ids.Append(int64(100 + i))
		v[3*i], v[3*i+1], v[3*i+2] = float32(i), 0.5, -float32(i)
	}
	idArr := ids.NewArray()
	defer idArr.Release()
	probs := tensor.NewFixedSizeList(buf, rows, 3)
	defer probs.Release()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "probabilities", Type: probs.DataType()}, // non-nullable field
	}, nil)
	return array.NewRecord(schema, []arrow.Array{idArr, probs}, int64(rows))
}

func TestRoundTripKeepsTensorValues(t *testing.T) {
	for _, name := range []string{"out.parquet", "out.arrow", "out.arrows"} {
		t.Run(name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			rec := predictions(t, mem, 5)
			defer rec.Release()
			path := filepath.Join(t.TempDir(), name)
			w, err := sink.Create(path, rec.Schema(), sink.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("the output is visible before Commit")
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			ds, err := dataset.Files([]string{path}, dataset.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			var got []float32
			var ids []int64
			for r, err := range ds.Records() {
				if err != nil {
					t.Fatal(err)
				}
				x, err := tensor.Float32(r.Column(1), 3)
				if err != nil {
					t.Fatalf("probabilities read back: %v", err)
				}
				got = append(got, x...)
				ids = append(ids, arrowtest.Int64s(t, "id", r)...)
			}
			want, _ := tensor.Float32(rec.Column(1), 3)
			if !slices.Equal(got, want) || !slices.Equal(ids, []int64{100, 101, 102, 103, 104}) {
				t.Fatalf("read back ids %v, values %v; want %v", ids, got, want)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 1 {
				t.Fatalf("temporary files left: %v", entries)
			}
		})
	}
}

func TestRefusesToOverwriteAndAborts(t *testing.T) {
	mem := arrowtest.Allocator(t)
	rec := predictions(t, mem, 2)
	defer rec.Release()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.parquet")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Create(path, rec.Schema()); !errors.Is(err, sink.ErrExists) {
		t.Fatalf("err %v, want ErrExists", err)
	}
	w, err := sink.Create(path, rec.Schema(), sink.WithOverwrite(true), sink.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatal("Abort touched the destination")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("Abort left %v", entries)
	}
	if err := w.Write(rec); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("write after abort: %v", err)
	}
	if _, err := sink.Create(filepath.Join(dir, "out.txt"), rec.Schema()); !errors.Is(err, sink.ErrFormat) {
		t.Fatalf("unknown extension: %v", err)
	}
	if _, err := sink.Create(filepath.Join(path, "nested.parquet"), rec.Schema()); err == nil {
		t.Fatal("an output under a regular file was accepted")
	}
}
