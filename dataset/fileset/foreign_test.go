package fileset_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/parquet-go/parquet-go"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// Rows as parquet-go (an implementation of Parquet independent of Arrow)
// writes them: a LIST of required floats, an optional LIST, and a bare
// repeated field (the legacy two-level form).
type listRow struct {
	ID       int64     `parquet:"id"`
	Name     string    `parquet:"name,plain"`
	Features []float32 `parquet:"features,list"`
}

// deltaNameRow keeps parquet-go's default string encoding,
// DELTA_LENGTH_BYTE_ARRAY.
type deltaNameRow struct {
	ID       int64     `parquet:"id"`
	Name     string    `parquet:"name"`
	Features []float32 `parquet:"features,list"`
}

type optionalListRow struct {
	ID       int64     `parquet:"id"`
	Features []float32 `parquet:"features,optional,list"`
}

type repeatedRow struct {
	ID       int64     `parquet:"id"`
	Features []float32 `parquet:"features"`
}

func foreignFeatures(i, k int) []float32 {
	f := make([]float32, k)
	for j := range f {
		f[j] = float32(i) + float32(j)/100
	}
	return f
}

// Files from another writer, in its encodings, read with every row and
// value as written, the float lists by the project's own decoder, null and
// ragged rows included.
func TestForeignWriterFiles(t *testing.T) {
	const rows, k = 1000, 6
	type file struct {
		write func(path string) error
		// features of row i as written; nil: a null row
		want func(i int) []float32
		// arrow-go v18.8.0's DELTA_LENGTH_BYTE_ARRAY decoder never frees a
		// 64-byte buffer per page (garbage to the Go allocator, a leak to
		// a checked one), whichever path reads the floats.
		unchecked bool
	}
	regular := func(i int) []float32 { return foreignFeatures(i, k) }
	listRows := func(feat func(int) []float32) []listRow {
		out := make([]listRow, rows)
		for i := range out {
			out[i] = listRow{ID: int64(i), Name: fmt.Sprintf("row %d", i), Features: feat(i)}
		}
		return out
	}
	withNull := func(i int) []float32 {
		if i == 640 {
			return nil
		}
		return regular(i)
	}
	ragged := func(i int) []float32 {
		if i == 333 {
			return foreignFeatures(i, k+2)
		}
		return regular(i)
	}
	files := map[string]file{
		"list, defaults": {func(p string) error {
			return pq.WriteFile(p, listRows(regular))
		}, regular, false},
		"list, zstd, v1 pages of 512 bytes, groups of 100": {func(p string) error {
			return pq.WriteFile(p, listRows(regular), pq.Compression(&pq.Zstd), pq.DataPageVersion(1),
				pq.PageBufferSize(512), pq.MaxRowsPerRowGroup(100))
		}, regular, false},
		"list, byte stream split floats": {func(p string) error {
			return pq.WriteFile(p, listRows(regular), pq.DefaultEncodingFor(pq.Float, &pq.ByteStreamSplit),
				pq.MaxRowsPerRowGroup(128))
		}, regular, false},
		"list, ragged row 333": {func(p string) error {
			return pq.WriteFile(p, listRows(ragged), pq.MaxRowsPerRowGroup(100))
		}, ragged, false},
		"optional list, null row 640": {func(p string) error {
			out := make([]optionalListRow, rows)
			for i := range out {
				out[i] = optionalListRow{ID: int64(i), Features: withNull(i)}
			}
			return pq.WriteFile(p, out, pq.MaxRowsPerRowGroup(100))
		}, withNull, false},
		"bare repeated field": {func(p string) error {
			out := make([]repeatedRow, rows)
			for i := range out {
				out[i] = repeatedRow{ID: int64(i), Features: regular(i)}
			}
			return pq.WriteFile(p, out, pq.MaxRowsPerRowGroup(300))
		}, regular, false},
		"list, strings in delta length encoding": {func(p string) error {
			out := make([]deltaNameRow, rows)
			for i := range out {
				out[i] = deltaNameRow{ID: int64(i), Name: fmt.Sprintf("row %d", i), Features: regular(i)}
			}
			return pq.WriteFile(p, out, pq.MaxRowsPerRowGroup(100))
		}, regular, true},
	}
	for name, f := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.parquet")
			if err := f.write(path); err != nil {
				t.Fatal(err)
			}
			var mem memory.Allocator = memory.NewGoAllocator()
			if !f.unchecked {
				mem = arrowtest.Allocator(t)
			}
			cols, n, err := readColumns(t, mem, path, fileset.WithReadRows(128))
			defer releaseAll(cols)
			if err != nil {
				t.Fatal(err)
			}
			if n != rows {
				t.Fatalf("read %d rows, wrote %d", n, rows)
			}
			ids := cols[0].(*array.Int64)
			feats, ok := cols[len(cols)-1].(*array.List)
			if !ok {
				t.Fatalf("features read as %s, want a list", cols[len(cols)-1].DataType())
			}
			values := feats.ListValues().(*array.Float32).Float32Values()
			for i := range rows {
				if ids.Value(i) != int64(i) {
					t.Fatalf("row %d: id %d", i, ids.Value(i))
				}
				want := f.want(i)
				if want == nil {
					if !feats.IsNull(i) {
						t.Fatalf("row %d: not null, written null", i)
					}
					continue
				}
				start, end := feats.ValueOffsets(i)
				if got := values[start:end]; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("row %d: %v, written %v", i, got, want)
				}
			}
			if names, err := fileset.TensorPathColumns(path); err != nil || fmt.Sprint(names) != "[features]" {
				t.Fatalf("the tensor decoder reads %v (%v), want [features]", names, err)
			}
			if !arrow.TypeEqual(feats.DataType().(*arrow.ListType).Elem(), arrow.PrimitiveTypes.Float32) {
				t.Fatalf("features of %s", feats.DataType())
			}
		})
	}
}
