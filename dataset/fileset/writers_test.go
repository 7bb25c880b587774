package fileset_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// corpusFile is one entry of testdata/writers/files/manifest.json, written
// by testdata/writers/generate.mjs.
type corpusFile struct {
	Name      string            `json:"name"`
	Writer    string            `json:"writer"`
	Rows      int64             `json:"rows"`
	K         int               `json:"k"`
	Irregular map[string]string `json:"irregular"`
	Damaged   string            `json:"damaged"`
}

// row returns file row i as written: its values (nil for a null row) and
// which of them are null.
func (f corpusFile) row(i int64) (vals []float32, nulls []bool) {
	kind := f.Irregular[strconv.FormatInt(i, 10)]
	n := f.K
	switch kind {
	case "null":
		return nil, nil
	case "empty":
		n = 0
	case "ragged":
		n = f.K + 1
	case "short":
		n = f.K - 1
	}
	vals, nulls = make([]float32, n), make([]bool, n)
	for j := range vals {
		vals[j] = float32(float64(i*7+int64(j))*0.5 - 1000)
	}
	switch kind {
	case "nullvalue":
		nulls[1] = true
	case "nan":
		vals[1] = float32(math.NaN())
	}
	return vals, nulls
}

// firstBadRow is the first row a model cannot read (null, empty, ragged, or
// holding a null value), or -1.
func (f corpusFile) firstBadRow() int64 {
	bad := int64(-1)
	for r, kind := range f.Irregular {
		i, _ := strconv.ParseInt(r, 10, 64)
		if kind != "nan" && (bad < 0 || i < bad) {
			bad = i
		}
	}
	return bad
}

func readManifest(t *testing.T) (dir string, files []corpusFile) {
	t.Helper()
	dir = filepath.Join("testdata", "writers", "files")
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &files); err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("the manifest lists %d files", len(files))
	}
	return dir, files
}

// Every file of the independent writers' corpus, read every way — whole,
// projected, in reads of 1, 7, 256 and 4,096 rows and the default, and in
// three shards — gives every row once with the id and values written, bit
// for bit (NaN as NaN).
func TestWritersCorpus(t *testing.T) {
	dir, files := readManifest(t)
	readings := map[string][]fileset.Option{
		"whole":          nil,
		"v only":         {fileset.WithColumns("v")},
		"v, id":          {fileset.WithColumns("v", "id")},
		"reads of 1":     {fileset.WithReadRows(1)},
		"reads of 7":     {fileset.WithReadRows(7)},
		"reads of 256":   {fileset.WithReadRows(256)},
		"reads of 4096":  {fileset.WithReadRows(4096)},
		"reads of 16384": {fileset.WithReadRows(16384)},
	}
	for _, f := range files {
		if f.Damaged != "" {
			continue
		}
		path := filepath.Join(dir, f.Name)
		if filepath.Ext(path) == ".parquet" {
			// Every Parquet file's float list goes through the project's
			// own decoder, irregular rows and all.
			if names, err := fileset.TensorPathColumns(path); err != nil || fmt.Sprint(names) != "[v]" {
				t.Fatalf("%s: the decoder reads %v (%v), want [v]", f.Name, names, err)
			}
		}
		for name, opts := range readings {
			t.Run(f.Name+"/"+name, func(t *testing.T) {
				if testing.Short() && name == "reads of 1" {
					t.Skip("reads of one row in -short")
				}
				mem := corpusAllocator(t, path, name != "v only")
				seen := make([]bool, f.Rows)
				checkCorpusRead(t, f, path, seen, append(opts, fileset.WithAllocator(mem))...)
				if i := slices.Index(seen, false); i >= 0 {
					t.Fatalf("file row %d never read", i)
				}
			})
		}
		t.Run(f.Name+"/3 shards", func(t *testing.T) {
			mem := corpusAllocator(t, path, true)
			seen := make([]bool, f.Rows)
			for s := range 3 {
				checkCorpusRead(t, f, path, seen, fileset.WithAllocator(mem), fileset.WithReadRows(256),
					fileset.WithShard(fileset.Shard{Index: s, Count: 3}))
			}
			if i := slices.Index(seen, false); i >= 0 {
				t.Fatalf("file row %d never read", i)
			}
		})
	}
}

// corpusAllocator returns a checked allocator, but for a read of the id
// column of a file that stores it DELTA_BINARY_PACKED: arrow-go v18.8.0's
// decoder of that encoding never releases its bit-width buffer (64 bytes a
// page, garbage to the Go allocator, a leak to a checked one). The float
// lists, read alone, are checked on every file.
func corpusAllocator(t *testing.T, path string, ids bool) memory.Allocator {
	t.Helper()
	if ids && filepath.Ext(path) == ".parquet" {
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		for g := range pf.NumRowGroups() {
			chunk, err := pf.MetaData().RowGroup(g).ColumnChunk(0)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(chunk.Encodings(), parquet.Encodings.DeltaBinaryPacked) {
				return memory.NewGoAllocator()
			}
		}
	}
	return arrowtest.Allocator(t)
}

// checkCorpusRead reads path and checks each row against the file row it
// comes from, marking it in seen.
func checkCorpusRead(t *testing.T, f corpusFile, path string, seen []bool, opts ...fileset.Option) {
	t.Helper()
	var from fileset.Origins
	ds, err := fileset.Read([]string{path}, append(opts, fileset.WithOrigins(&from))...)
	if err != nil {
		t.Fatal(err)
	}
	var row int64
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		v := rec.Column(rec.Schema().FieldIndices("v")[0])
		var ids *array.Int64
		if idx := rec.Schema().FieldIndices("id"); len(idx) == 1 {
			ids = rec.Column(idx[0]).(*array.Int64)
		}
		for i := range int(rec.NumRows()) {
			o, ok := from.Locate(row + int64(i))
			if ok && o.Row < 0 && ids != nil {
				// An IPC shard names the record batch, not the file row:
				// the id written says which row it is.
				o.Row = ids.Value(i)
			}
			if !ok || o.Row < 0 || o.Row >= f.Rows {
				t.Fatalf("dataset row %d comes from %+v", row+int64(i), o)
			}
			if seen[o.Row] {
				t.Fatalf("file row %d read twice", o.Row)
			}
			seen[o.Row] = true
			if ids != nil && ids.Value(i) != o.Row {
				t.Fatalf("file row %d: id %d", o.Row, ids.Value(i))
			}
			if err := sameRow(v, i, f, o.Row); err != nil {
				t.Fatalf("file row %d: %v", o.Row, err)
			}
		}
		row += rec.NumRows()
	}
}

// sameRow compares row i of a list or fixed_size_list column with file
// row fileRow as written.
func sameRow(v arrow.Array, i int, f corpusFile, fileRow int64) error {
	want, nulls := f.row(fileRow)
	if want == nil || v.IsNull(i) {
		if want != nil || !v.IsNull(i) {
			return fmt.Errorf("null %t, written null %t", v.IsNull(i), want == nil)
		}
		return nil
	}
	list := v.(array.ListLike)
	start, end := list.ValueOffsets(i)
	if int(end-start) != len(want) {
		return fmt.Errorf("%d values, written %d", end-start, len(want))
	}
	values := list.ListValues().(*array.Float32)
	for j := range want {
		at := int(start) + j
		got := values.Value(at)
		switch {
		case values.IsNull(at) != nulls[j]:
			return fmt.Errorf("value %d null %t, written null %t", j, values.IsNull(at), nulls[j])
		case nulls[j]:
		case math.IsNaN(float64(want[j])):
			if !math.IsNaN(float64(got)) {
				return fmt.Errorf("value %d is %v, written NaN", j, got)
			}
		case math.Float32bits(got) != math.Float32bits(want[j]):
			return fmt.Errorf("value %d is %v, written %v", j, got, want[j])
		}
	}
	return nil
}

// Read as a tensor of the written width, each file is exact up to its
// first row a model cannot read, and the error names that file row.
func TestWritersCorpusAsTensor(t *testing.T) {
	dir, files := readManifest(t)
	for _, f := range files {
		if f.Damaged != "" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			path := filepath.Join(dir, f.Name)
			mem := corpusAllocator(t, path, true)
			var from fileset.Origins
			ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem),
				fileset.WithReadRows(256), fileset.WithOrigins(&from))
			if err != nil {
				t.Fatal(err)
			}
			if ds, err = dataset.AsTensor(ds, "v", f.K); err != nil {
				t.Fatal(err)
			}
			var rows int64
			var rerr error
			for rec, err := range ds.Records() {
				if err != nil {
					rerr = err
					break
				}
				rows += rec.NumRows()
			}
			bad := f.firstBadRow()
			if bad < 0 {
				if rerr != nil || rows != f.Rows {
					t.Fatalf("%d rows of %d (%v)", rows, f.Rows, rerr)
				}
				return
			}
			var re *dataset.RowError
			if !errors.As(rerr, &re) {
				t.Fatalf("error %v, want a row error at file row %d", rerr, bad)
			}
			if o, ok := from.Locate(re.Row); !ok || o.Row != bad {
				t.Fatalf("error %v at %+v, want file row %d", rerr, o, bad)
			}
		})
	}
}

// An Arrow IPC file whose fixed_size_list child is shorter than its rows
// need (Arrow JS writes one without a complaint) is refused with an error
// naming the file and the record batch, not read with shifted values.
func TestWritersCorpusDamaged(t *testing.T) {
	dir, files := readManifest(t)
	damaged := 0
	for _, f := range files {
		if f.Damaged == "" {
			continue
		}
		damaged++
		t.Run(f.Name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			path := filepath.Join(dir, f.Name)
			ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem))
			if err == nil {
				for _, err = range ds.Records() {
					if err != nil {
						break
					}
				}
			}
			if !errors.Is(err, fileset.ErrUnreadable) {
				t.Fatalf("read with %v, want ErrUnreadable (%s)", err, f.Damaged)
			}
			t.Log(err)
		})
	}
	if damaged == 0 {
		t.Fatal("no damaged file in the corpus")
	}
}
