package dataset_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/tensor"
)

var scalars = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "a", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "b", Type: arrow.PrimitiveTypes.Float64},
	{Name: "c", Type: arrow.PrimitiveTypes.Int16},
}, nil)

func TestGather(t *testing.T) {
	mem := arrowtest.Allocator(t)
	rec, _, err := array.RecordFromJSON(mem, scalars, strings.NewReader(`[
		{"id": 7, "a": 1.5, "b": 2, "c": 3},
		{"id": 8, "a": -1, "b": 0.25, "c": -4}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	ds, err := dataset.Gather(dataset.FromRecords(scalars, rec), mem, "x", "c", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := ds.Schema().String(); !strings.Contains(got, "id: type=int64") || ds.Schema().NumFields() != 2 || ds.Schema().Field(1).Name != "x" {
		t.Fatalf("schema %s", got)
	}
	for out, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		x, err := tensor.Float32(out.Column(1), 3)
		if err != nil {
			t.Fatal(err)
		}
		if want := []float32{3, 1.5, 2, -4, -1, 0.25}; !slices.Equal(x, want) {
			t.Fatalf("x %v, want %v", x, want)
		}
		if ids := arrowtest.Int64s(t, "id", out); !slices.Equal(ids, []int64{7, 8}) {
			t.Fatalf("ids %v", ids)
		}
	}
}

func TestGatherErrors(t *testing.T) {
	mem := arrowtest.Allocator(t)
	ds := dataset.FromRecords(scalars)
	for _, c := range []struct {
		cols []string
		say  string
	}{
		{nil, "no columns"},
		{[]string{"a", "zz"}, `column "zz": 0 columns`},
		{[]string{"a", "a"}, "given twice"},
	} {
		if _, err := dataset.Gather(ds, mem, "x", c.cols...); !errors.Is(err, dataset.ErrGather) || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%v: err %v, want %q", c.cols, err, c.say)
		}
	}
	if _, err := dataset.Gather(ds, mem, "id", "a"); err == nil || !strings.Contains(err.Error(), `"id" already exists`) {
		t.Errorf("name clash: err %v", err)
	}
	strs := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	if _, err := dataset.Gather(dataset.FromRecords(strs), mem, "x", "s"); err == nil || !strings.Contains(err.Error(), "want a number") {
		t.Errorf("string column: err %v", err)
	}

	rec, _, err := array.RecordFromJSON(mem, scalars, strings.NewReader(`[
		{"id": 1, "a": 1, "b": 2, "c": 3}, {"id": 2, "a": null, "b": 2, "c": 3}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	g, err := dataset.Gather(dataset.FromRecords(scalars, rec), mem, "x", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range g.Records() {
		if !errors.Is(err, dataset.ErrGather) || !strings.Contains(err.Error(), `column "a": row 1 is null`) {
			t.Fatalf("null: err %v", err)
		}
	}
}

func TestMatchColumns(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "f1", Type: arrow.PrimitiveTypes.Float32}, {Name: "g", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f0", Type: arrow.PrimitiveTypes.Float32}}, nil)
	// Schema order, each column once although two patterns match it.
	got, err := dataset.MatchColumns(schema, "g", "f*", "f1")
	if err != nil || !slices.Equal(got, []string{"f1", "g", "f0"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := dataset.MatchColumns(schema, "x*"); err != nil || len(got) != 0 {
		t.Fatalf("no match: got %v, %v", got, err)
	}
	if _, err := dataset.MatchColumns(schema, "f["); err == nil || !strings.Contains(err.Error(), `"f["`) {
		t.Fatalf("bad pattern: err %v", err)
	}
}
