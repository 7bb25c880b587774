package sink_test

import (
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/tensor"
)

// The float values of tensors get no statistics; every other column keeps
// its own, which readers prune row groups by.
func TestParquetStatisticsSkipTensorValues(t *testing.T) {
	mem := arrowtest.Allocator(t)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "score", Type: arrow.PrimitiveTypes.Float32},
		{Name: "probabilities", Type: tensor.Type(3)},
		{Name: "token_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := range 100 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.Float32Builder).Append(float32(i) / 2)
		fl := b.Field(2).(*array.FixedSizeListBuilder)
		fl.Append(true)
		fl.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{float32(i), 1, 2}, nil)
		ll := b.Field(3).(*array.ListBuilder)
		ll.Append(true)
		ll.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{int32(i), 7}, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	path := writeInRecords(t, rec, func(int) int { return 40 }, sink.WithAllocator(mem))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	rg := pf.MetaData().RowGroup(0)
	for i, want := range []bool{true, true, false, true} {
		col, err := rg.ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		if set, _ := col.StatsSet(); set != want {
			t.Errorf("column %s: statistics %v, want %v", col.PathInSchema(), set, want)
		}
	}
	tbl := readTable(t, mem, path)
	defer tbl.Release()
	if tbl.NumRows() != 100 {
		t.Fatalf("read %d rows, want 100", tbl.NumRows())
	}
}
