package job_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/tensor"
)

// writeLabelled writes 300 rows of id, a nullable label (id mod 3) and
// list<float32> features: label is null where nullLabel says, and
// features are bad[id] where given (nil: a null row).
func writeLabelled(t *testing.T, path string, bad map[int64][]float32, nullLabel func(id int64) bool) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "features", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(arrowtest.Allocator(t), schema)
	defer b.Release()
	lb := b.Field(2).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Float32Builder)
	for id := range int64(300) {
		b.Field(0).(*array.Int64Builder).Append(id)
		if nullLabel(id) {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.Int64Builder).Append(id % 3)
		}
		v, ok := bad[id]
		switch {
		case !ok:
			lb.Append(true)
			vb.AppendValues(make([]float32, width), nil)
		case v == nil:
			lb.AppendNull()
		default:
			lb.Append(true)
			vb.AppendValues(v, nil)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	writeForeign(t, path, rec)
}

// WriteFile, Each and Read set rows aside as Run does, to a file written
// whole: the same rows, with their keys, source, file row and reason. A
// Label is passed on beside the predictions, never gathered, and a row
// whose label is null is set aside. Read learns the width past a null
// first row, and sets aside only what has no values (no model refuses a
// NaN there).
func TestSetAsideWrittenWhole(t *testing.T) {
	mem := arrowtest.Allocator(t)
	m, err := cpu.NewMLP([]int{width, 16, 3}, cpu.Tanh, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "in.parquet")
	nan := float32(math.NaN())
	writeLabelled(t, input, map[int64][]float32{0: nil, 7: {nan, 0, 0, 0, 0, 0, 0, 0}, 150: {1, 2, 3}},
		func(id int64) bool { return id == 40 || id == 41 || id == 299 })

	// Run and WriteFile set the same rows aside (the label is a key here).
	ref := config(mem, input, filepath.Join(dir, "ref.parquet"), m)
	ref.Keep = []string{"id", "label"}
	ref.SetAside = filepath.Join(dir, "ref-aside.parquet")
	if _, err := job.Run(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	wf := ref
	wf.Output, wf.SetAside = filepath.Join(dir, "wf.parquet"), filepath.Join(dir, "wf-aside.parquet")
	sum, err := job.WriteFile(t.Context(), wf)
	if err != nil {
		t.Fatal(err)
	}
	wantRef := []string{"0 0 in.parquet 0 features null", "7 1 in.parquet 7 features NaN", "150 0 in.parquet 150 features 8"}
	if got := readAside(t, wf.SetAside); !slices.Equal(got, readAside(t, ref.SetAside)) || !slices.Equal(got, wantRef) {
		t.Fatalf("WriteFile set aside\n%s\nRun\n%s", strings.Join(got, "\n"), strings.Join(readAside(t, ref.SetAside), "\n"))
	}
	if sum.Rows != 297 || sum.RowsSetAside != 3 || !slices.Equal(outputIDs(t, wf.Output), outputIDs(t, ref.Output)) {
		t.Fatalf("WriteFile: %+v", sum)
	}
	// A second WriteFile without Overwrite leaves the set-aside file be.
	if _, err := job.WriteFile(t.Context(), wf); err == nil {
		t.Fatal("WriteFile replaced its set-aside file without Overwrite")
	}

	// Each, with the label as Label: the null labels go aside too.
	each := config(mem, input, "", m)
	each.Label, each.SetAside = "label", filepath.Join(dir, "each-aside.parquet")
	var ids, labels []int64
	sum, err = job.Each(t.Context(), each, func(rec arrow.RecordBatch) error {
		if rec.Schema().HasField("features") {
			t.Errorf("Each passed the features on: %s", rec.Schema())
		}
		ids = append(ids, arrowtest.Int64s(t, "id", rec)...)
		labels = append(labels, arrowtest.Int64s(t, "label", rec)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	skipped := []int64{0, 7, 40, 41, 150, 299}
	if sum.Rows != 294 || sum.RowsSetAside != 6 || len(ids) != 294 {
		t.Fatalf("Each: %+v, %d ids", sum, len(ids))
	}
	for i, id := range ids {
		if slices.Contains(skipped, id) || labels[i] != id%3 || i > 0 && id <= ids[i-1] {
			t.Fatalf("Each: row %d is id %d label %d", i, id, labels[i])
		}
	}
	// The set-aside rows carry the label, as a key.
	wantEach := []string{"0 0 in.parquet 0 features null", "7 1 in.parquet 7 features NaN", "40 (null) in.parquet 40 label label",
		"41 (null) in.parquet 41 label label", "150 0 in.parquet 150 features 8", "299 (null) in.parquet 299 label label"}
	if got := readAside(t, each.SetAside); !slices.Equal(got, wantEach) {
		t.Fatalf("Each set aside\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantEach, "\n"))
	}

	// Read: no model, the width learned from row 1.
	read := job.Config{Inputs: []string{input}, Keep: []string{"id"}, Label: "label", ReadRows: 77,
		Allocator: mem, SetAside: filepath.Join(dir, "read-aside.parquet")}
	rows := 0
	sum, err = job.Read(t.Context(), read, func(rec arrow.RecordBatch) error {
		if _, err := tensor.Float32(rec.Column(rec.Schema().FieldIndices("features")[0]), width); err != nil {
			t.Errorf("Read passed on a row the screen should have set aside: %v", err)
		}
		rows += int(rec.NumRows())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantRead := []string{"0 0 in.parquet 0 features null", "40 (null) in.parquet 40 label label",
		"41 (null) in.parquet 41 label label", "150 0 in.parquet 150 features 8", "299 (null) in.parquet 299 label label"}
	if got := readAside(t, read.SetAside); rows != 295 || sum.RowsSetAside != 5 || !slices.Equal(got, wantRead) {
		t.Fatalf("Read: %d rows, %+v, set aside\n%s", rows, sum, strings.Join(got, "\n"))
	}
	// Each and Read refuse what is not theirs.
	if _, err := job.Each(t.Context(), ref, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Error("Each took an Output")
	}
	if _, err := job.Read(t.Context(), each, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Error("Read took a Model")
	}
}
