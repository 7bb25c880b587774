package pad_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/tensor"
)

// allTypes has a column of every type a feature column may have.
var allTypes = arrow.NewSchema([]arrow.Field{
	{Name: "i8", Type: arrow.PrimitiveTypes.Int8},
	{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32},
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
	{Name: "u8", Type: arrow.PrimitiveTypes.Uint8},
	{Name: "u16", Type: arrow.PrimitiveTypes.Uint16},
	{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
	{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
	{Name: "f16", Type: arrow.FixedWidthTypes.Float16},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ls", Type: arrow.BinaryTypes.LargeString},
	{Name: "bin", Type: arrow.BinaryTypes.Binary},
	{Name: "lbin", Type: arrow.BinaryTypes.LargeBinary},
	{Name: "fbin", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}},
	{Name: "d32", Type: arrow.FixedWidthTypes.Date32},
	{Name: "d64", Type: arrow.FixedWidthTypes.Date64},
	{Name: "t32", Type: arrow.FixedWidthTypes.Time32ms},
	{Name: "t64", Type: arrow.FixedWidthTypes.Time64us},
	{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us},
	{Name: "dur", Type: arrow.FixedWidthTypes.Duration_ms},
	{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
	{Name: "img", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)},
	{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	{Name: "ltokens", Type: arrow.LargeListOf(arrow.BinaryTypes.String)},
	{Name: "st", Type: arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		arrow.Field{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
		arrow.Field{Name: "inner", Type: arrow.StructOf(arrow.Field{Name: "y", Type: arrow.PrimitiveTypes.Int16})},
	)},
}, nil)

const allTypesRow = `{"i8": -3, "i16": 300, "i32": -70000, "i64": 9000000000, "u8": 200, "u16": 60000,
 "u32": 4000000000, "u64": 18000000000000000000, "f16": 1.5, "f32": 2.25, "f64": -3.125, "b": true,
 "s": "héllo", "ls": "large", "bin": "AQID", "lbin": "BAU=", "fbin": "YWJj", "d32": "2024-02-29",
 "d64": "2024-03-01", "t32": "12:34:56.789", "t64": "01:02:03.000004", "ts": "2024-01-02T03:04:05.000006Z",
 "dur": 1500, "dec": "12345.67", "img": [1, 2, 3, 4], "tokens": [7, 8, 9],
 "ltokens": ["a", "bc"], "st": {"x": 0.5, "tags": ["t"], "inner": {"y": 11}}}`

func allTypesRecord(t *testing.T, mem memory.Allocator, rows int) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, allTypes, strings.NewReader("["+strings.Repeat(allTypesRow+",", rows-1)+allTypesRow+"]"))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestPadStripRoundTripEveryType(t *testing.T) {
	mem := arrowtest.Allocator(t)
	p, err := pad.New(mem, allTypes, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	for _, rows := range []int{1, 3, 5} {
		rec := allTypesRecord(t, mem, rows)
		padded, padding, err := p.Pad(rec)
		if err != nil {
			t.Fatal(err)
		}
		if padding != 5-rows || padded.NumRows() != 5 || !padded.Schema().Equal(p.Schema()) {
			t.Fatalf("rows %d: padding %d, padded rows %d, schema %s", rows, padding, padded.NumRows(), padded.Schema())
		}
		flags := padded.Column(int(padded.NumCols()) - 1).(*array.Boolean)
		for i := range 5 {
			if flags.IsNull(i) || flags.Value(i) != (i >= rows) {
				t.Fatalf("rows %d: is_padding[%d] = %v", rows, i, flags.Value(i))
			}
		}
		for c, col := range padded.Columns()[:allTypes.NumFields()] {
			for i := rows; i < 5; i++ {
				assertZero(t, allTypes.Field(c).Name, col, i)
			}
		}
		stripped, removed, err := pad.Strip(padded)
		if err != nil {
			t.Fatal(err)
		}
		if removed != padding || !stripped.Schema().Equal(allTypes) || !array.RecordEqual(stripped, rec) {
			t.Fatalf("rows %d: strip removed %d, got\n%v\nwant\n%v", rows, removed, stripped, rec)
		}
		stripped.Release()
		padded.Release()
		rec.Release()
	}
}

// assertZero fails unless row i of arr is a valid zero value, recursively.
func assertZero(t *testing.T, name string, arr arrow.Array, i int) {
	t.Helper()
	if arr.IsNull(i) {
		t.Fatalf("column %s: padding row %d is null", name, i)
	}
	zero := true
	switch a := arr.(type) {
	case *array.Int8:
		zero = a.Value(i) == 0
	case *array.Int16:
		zero = a.Value(i) == 0
	case *array.Int32:
		zero = a.Value(i) == 0
	case *array.Int64:
		zero = a.Value(i) == 0
	case *array.Uint8:
		zero = a.Value(i) == 0
	case *array.Uint16:
		zero = a.Value(i) == 0
	case *array.Uint32:
		zero = a.Value(i) == 0
	case *array.Uint64:
		zero = a.Value(i) == 0
	case *array.Float16:
		zero = a.Value(i) == float16.New(0)
	case *array.Float32:
		zero = a.Value(i) == 0
	case *array.Float64:
		zero = a.Value(i) == 0
	case *array.Boolean:
		zero = !a.Value(i)
	case *array.Date32:
		zero = a.Value(i) == 0
	case *array.Date64:
		zero = a.Value(i) == 0
	case *array.Time32:
		zero = a.Value(i) == 0
	case *array.Time64:
		zero = a.Value(i) == 0
	case *array.Timestamp:
		zero = a.Value(i) == 0
	case *array.Duration:
		zero = a.Value(i) == 0
	case *array.Decimal128:
		zero = a.Value(i) == decimal128.Num{}
	case *array.FixedSizeBinary:
		zero = string(a.Value(i)) == "\x00\x00\x00"
	case array.BinaryLike:
		zero = a.ValueLen(i) == 0
	case *array.FixedSizeList:
		beg, end := a.ValueOffsets(i)
		for j := beg; j < end; j++ {
			assertZero(t, name+"[]", a.ListValues(), int(j))
		}
	case array.ListLike:
		b, e := a.ValueOffsets(i)
		zero = b == e
	case *array.Struct:
		for f := range a.NumField() {
			assertZero(t, name+"."+a.DataType().(*arrow.StructType).Field(f).Name, a.Field(f), i)
		}
	default:
		t.Fatalf("column %s: no zero check for %s", name, arr.DataType())
	}
	if !zero {
		t.Fatalf("column %s: padding row %d is %s, want zero", name, i, arr.ValueStr(i))
	}
}

// Arrow v15's builders dropped the non-nullability of list elements (v18's
// keep it, and pad no longer relabels the zeros it builds); a padded
// column must keep its exact type all the same.
func TestPadNonNullableTensor(t *testing.T) {
	mem := arrowtest.Allocator(t)
	buf, vals := tensor.NewBuffer(mem, 6)
	copy(vals, []float32{1, 2, 3, 4, 5, 6})
	col := tensor.NewFixedSizeList(buf, 3, 2)
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: col.DataType()}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 3)
	defer rec.Release()
	p, err := pad.New(mem, schema, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	padded, _, err := p.Pad(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer padded.Release()
	if !arrow.TypeEqual(padded.Column(0).DataType(), col.DataType()) {
		t.Fatalf("padded type %s, want %s", padded.Column(0).DataType(), col.DataType())
	}
	got, err := tensor.Float32(padded.Column(0), 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 2, 3, 4, 5, 6, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("values %v, want %v", got, want)
	}
}

func TestPadFullBatchSharesColumns(t *testing.T) {
	mem := arrowtest.Allocator(t)
	rec := arrowtest.IDs(mem, 0, 4)
	defer rec.Release()
	p, err := pad.New(mem, arrowtest.IDSchema, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	padded, padding, err := p.Pad(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer padded.Release()
	if padding != 0 || padded.Column(0) != rec.Column(0) {
		t.Fatalf("full batch: padding %d, column copied", padding)
	}
	if flags := padded.Column(1).(*array.Boolean); flags.NullN() != 0 || pad.RealRows(flags) != 4 {
		t.Fatal("full batch: is_padding not all false")
	}
}

// PadRows pads rows of a record where they lie, as PadTo pads the same
// rows sliced out first.
func TestPadRowsOfARecord(t *testing.T) {
	mem := arrowtest.Allocator(t)
	rec := arrowtest.IDs(mem, 0, 10)
	defer rec.Release()
	p, err := pad.New(mem, arrowtest.IDSchema, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	for _, c := range []struct {
		offset, rows, size int
		ids                []int64
		real               int
	}{
		{3, 4, 4, []int64{3, 4, 5, 6}, 4},
		{8, 2, 4, []int64{8, 9, 0, 0}, 2},
		{9, 1, 2, []int64{9, 0}, 1},
		{0, 0, 1, []int64{0}, 0},
	} {
		padded, padding, err := p.PadRows(rec, c.offset, c.rows, c.size)
		if err != nil {
			t.Fatalf("rows %d+%d: %v", c.offset, c.rows, err)
		}
		ids := arrowtest.Int64s(t, "id", padded)
		real := pad.RealRows(padded.Column(1).(*array.Boolean))
		padded.Release()
		if !slices.Equal(ids, c.ids) || padding != c.size-c.rows || real != c.real {
			t.Fatalf("rows %d+%d to %d: ids %v, padding %d, real %d; want %v, %d, %d", c.offset, c.rows, c.size, ids, padding, real, c.ids, c.size-c.rows, c.real)
		}
	}
	for _, bad := range [][2]int{{8, 3}, {-1, 2}, {11, 0}} {
		if padded, _, err := p.PadRows(rec, bad[0], bad[1], 4); err == nil {
			padded.Release()
			t.Fatalf("rows %d+%d of 10: no error", bad[0], bad[1])
		}
	}
}

func TestPadErrors(t *testing.T) {
	mem := arrowtest.Allocator(t)
	withFlag := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}, pad.Field()}, nil)
	if _, err := pad.New(mem, withFlag, 4); !errors.Is(err, pad.ErrColumnExists) {
		t.Fatalf("schema with is_padding: err %v, want ErrColumnExists", err)
	}
	dict := arrow.NewSchema([]arrow.Field{{Name: "cat", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}}}, nil)
	_, err := pad.New(mem, dict, 4)
	if !errors.Is(err, pad.ErrUnsupportedType) || !strings.Contains(err.Error(), `"cat"`) || !strings.Contains(err.Error(), "dictionary") {
		t.Fatalf("dictionary column: err %v, want ErrUnsupportedType naming the column and type", err)
	}
	nested := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "u", Type: arrow.SparseUnionOf(nil, nil)})}}, nil)
	if _, err := pad.New(mem, nested, 4); !errors.Is(err, pad.ErrUnsupportedType) || !strings.Contains(err.Error(), `"u"`) {
		t.Fatalf("union inside struct: err %v", err)
	}
	if _, err := pad.New(mem, arrowtest.IDSchema, 0); err == nil {
		t.Fatal("size 0 accepted")
	}

	p, err := pad.New(mem, arrowtest.IDSchema, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	long := arrowtest.IDs(mem, 0, 3)
	defer long.Release()
	if _, _, err := p.Pad(long); !errors.Is(err, pad.ErrTooManyRows) {
		t.Fatalf("3 rows into 2: err %v", err)
	}
	if _, _, err := pad.Strip(long); !errors.Is(err, pad.ErrNoColumn) {
		t.Fatalf("strip without is_padding: err %v", err)
	}
}

func TestStripRejectsInterleavedPadding(t *testing.T) {
	mem := arrowtest.Allocator(t)
	ids := arrowtest.IDs(mem, 0, 3)
	defer ids.Release()
	b := array.NewBooleanBuilder(mem)
	defer b.Release()
	b.AppendValues([]bool{false, true, false}, nil)
	flags := b.NewArray()
	defer flags.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{ids.Schema().Field(0), pad.Field()}, nil), []arrow.Array{ids.Column(0), flags}, 3)
	defer rec.Release()
	if _, _, err := pad.Strip(rec); !errors.Is(err, pad.ErrNotTrailing) {
		t.Fatalf("err %v, want ErrNotTrailing", err)
	}
}
