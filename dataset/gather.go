package dataset

import (
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/tensor"
)

// ErrGather reports columns that cannot be gathered into a tensor column.
var ErrGather = errors.New("dataset: cannot gather columns")

// MatchColumns returns the names of the schema's columns that match any
// of the path.Match patterns (such as "f*"), in schema order, each once:
// the columns to Gather.
func MatchColumns(schema *arrow.Schema, patterns ...string) ([]string, error) {
	for _, pat := range patterns {
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("dataset: pattern %q: %w", pat, err)
		}
	}
	var names []string
	for _, f := range schema.Fields() {
		if matchesAny(f.Name, patterns) {
			names = append(names, f.Name)
		}
	}
	return names, nil
}

// matchesAny reports whether name matches one of the patterns; a
// malformed pattern matches nothing.
func matchesAny(name string, patterns []string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// Gather returns a dataset in which the named numeric columns are replaced
// by one fixed_size_list<float32>[len(columns)] column called name,
// appended after the remaining columns. Row r of the new column holds row r
// of each named column, in the order given, as float32; so a plain table
// of 64 float columns becomes a [rows, 64] tensor. A null value is an
// error naming the column and row.
func Gather(ds *Dataset, mem memory.Allocator, name string, columns ...string) (*Dataset, error) {
	in := ds.Schema()
	if len(columns) == 0 {
		return nil, fmt.Errorf("%w: no columns given", ErrGather)
	}
	idx := make([]int, len(columns))
	for i, c := range columns {
		found := in.FieldIndices(c)
		if len(found) != 1 {
			return nil, fmt.Errorf("%w: column %q: %d columns of that name in %s", ErrGather, c, len(found), in)
		}
		if !arrow.IsFloating(in.Field(found[0]).Type.ID()) && !arrow.IsInteger(in.Field(found[0]).Type.ID()) {
			return nil, fmt.Errorf("%w: column %q is %s, want a number", ErrGather, c, in.Field(found[0]).Type)
		}
		if slices.Contains(idx[:i], found[0]) {
			return nil, fmt.Errorf("%w: column %q given twice", ErrGather, c)
		}
		idx[i] = found[0]
	}
	var keep []int
	var fields []arrow.Field
	for i, f := range in.Fields() {
		if !slices.Contains(idx, i) {
			if f.Name == name {
				return nil, fmt.Errorf("%w: output column %q already exists", ErrGather, name)
			}
			keep = append(keep, i)
			fields = append(fields, f)
		}
	}
	width := len(columns)
	fields = append(fields, arrow.Field{Name: name, Type: tensor.Type(width)})
	md := in.Metadata()
	out := arrow.NewSchema(fields, &md)

	return Map(ds, out, func(rec arrow.RecordBatch, first int64) (arrow.RecordBatch, error) {
		return gatherRecord(mem, rec, out, keep, idx, columns, first)
	}), nil
}

// gatherRecord gathers one record whose first row is dataset row first.
func gatherRecord(mem memory.Allocator, rec arrow.RecordBatch, out *arrow.Schema, keep, idx []int, names []string, first int64) (arrow.RecordBatch, error) {
	rows, width := int(rec.NumRows()), len(idx)
	for j, c := range idx {
		if col := rec.Column(c); col.NullN() > 0 {
			r := 0
			for !col.IsNull(r) {
				r++
			}
			return nil, &RowError{Row: first + int64(r), Column: names[j], Err: fmt.Errorf("%w: column %q: row %d is null", ErrGather, names[j], r)}
		}
	}
	buf, vals := tensor.NewBuffer(mem, rows*width)
	for j, c := range idx {
		scatter(rec.Column(c), vals, j, width)
	}
	features := tensor.NewFixedSizeList(buf, rows, width)
	defer features.Release()
	cols := make([]arrow.Array, 0, len(keep)+1)
	for _, k := range keep {
		cols = append(cols, rec.Column(k))
	}
	return array.NewRecordBatch(out, append(cols, features), int64(rows)), nil
}

// scatter writes column col into vals[r*width+j] for every row r.
func scatter(col arrow.Array, vals []float32, j, width int) {
	switch a := col.(type) {
	case *array.Float32:
		for r, v := range a.Float32Values() {
			vals[r*width+j] = v
		}
	case *array.Float64:
		for r, v := range a.Float64Values() {
			vals[r*width+j] = float32(v)
		}
	case *array.Int64:
		for r, v := range a.Int64Values() {
			vals[r*width+j] = float32(v)
		}
	case *array.Int32:
		for r, v := range a.Int32Values() {
			vals[r*width+j] = float32(v)
		}
	default:
		for r := range col.Len() {
			vals[r*width+j] = float32(valueAsFloat(col, r))
		}
	}
}

// valueAsFloat reads any numeric value the slow way.
func valueAsFloat(col arrow.Array, r int) float64 {
	switch a := col.(type) {
	case *array.Float16:
		return float64(a.Value(r).Float32())
	case *array.Int8:
		return float64(a.Value(r))
	case *array.Int16:
		return float64(a.Value(r))
	case *array.Uint8:
		return float64(a.Value(r))
	case *array.Uint16:
		return float64(a.Value(r))
	case *array.Uint32:
		return float64(a.Value(r))
	case *array.Uint64:
		return float64(a.Value(r))
	}
	panic(fmt.Sprintf("dataset: gather: unexpected type %s", col.DataType()))
}
