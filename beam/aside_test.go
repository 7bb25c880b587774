package dpbeam

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/sink"
)

// With SetAside, a shard writes the rows its model cannot predict (NaN
// features here) to the file of its name in the set-aside folder and goes
// on: every other row is predicted once, the set-aside rows carry their
// keys and file rows, and the manifest counts both.
func TestPipelineSetsRowsAside(t *testing.T) {
	dir := t.TempDir()
	const rows, w = 3000, 4
	bad := []int64{5, 1500, 1501, 2999}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "features", Type: arrow.FixedSizeListOf(w, arrow.PrimitiveTypes.Float32)}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	vals := b.Field(1).(*array.FixedSizeListBuilder).ValueBuilder().(*array.Float32Builder)
	for id := range int64(rows) {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.FixedSizeListBuilder).Append(true)
		v := float32(id % 7)
		if slices.Contains(bad, id) {
			v = float32(math.NaN())
		}
		vals.AppendValues([]float32{v, 1, 2, 3}, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	in := filepath.Join(dir, "in.parquet")
	sw, err := sink.Create(in, schema, sink.WithRowGroupRows(1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(); err != nil {
		t.Fatal(err)
	}
	m, err := cpu.NewMLP([]int{w, 8, 3}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "m.dpmlp")
	if err := m.SaveFile(model); err != nil {
		t.Fatal(err)
	}
	out, aside := filepath.Join(dir, "out"), filepath.Join(dir, "aside")
	if err := run(t, Config{Inputs: []string{in}, Model: model, Output: out, SetAside: aside, Keep: []string{"id"},
		BatchSize: 64, PartRows: 1000}); err != nil {
		t.Fatal(err)
	}
	got := readPredictions(t, filepath.Join(out, "part-*.parquet"))
	if len(got) != rows-len(bad) {
		t.Errorf("%d rows predicted, want %d", len(got), rows-len(bad))
	}
	for _, id := range bad {
		if _, ok := got[id]; ok {
			t.Errorf("id %d, a NaN row, was predicted", id)
		}
	}
	pattern := filepath.Join(aside, "part-*.parquet")
	ids, fileRows := filetest.Column(t, pattern, "id"), filetest.Column(t, pattern, "file_row")
	var want []string
	for _, id := range bad {
		want = append(want, fmt.Sprint(id))
	}
	if !slices.Equal(ids, want) || !slices.Equal(fileRows, want) {
		t.Fatalf("set aside ids %v at file rows %v, want %v", ids, fileRows, want)
	}
	var man job.UnitManifest
	data, err := os.ReadFile(filepath.Join(out, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &man); err != nil {
		t.Fatal(err)
	}
	if man.Rows != rows-int64(len(bad)) || man.RowsSetAside != int64(len(bad)) || len(man.Parts) != 2 {
		t.Fatalf("manifest %+v", man)
	}
}
