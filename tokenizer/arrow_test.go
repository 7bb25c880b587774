package tokenizer

import (
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
)

// Tokens adds a token-id column for string, large_string, string_view
// and dictionary-encoded text, each row as Encode gives it; a null text
// is a row error naming its row and column.
func TestTokensColumn(t *testing.T) {
	tok, err := LoadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"Hello, world!", "", "permission is hereby granted", "naïve café"}
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.StringView,
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}} {
		t.Run(dt.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			schema := arrow.NewSchema([]arrow.Field{{Name: "body", Type: dt, Nullable: true}}, nil)
			b := array.NewRecordBuilder(mem, schema)
			for _, s := range texts {
				switch fb := b.Field(0).(type) {
				case *array.StringBuilder:
					fb.Append(s)
				case *array.LargeStringBuilder:
					fb.Append(s)
				case *array.StringViewBuilder:
					fb.Append(s)
				case *array.BinaryDictionaryBuilder:
					fb.AppendString(s)
				}
			}
			b.Field(0).AppendNull()
			rec := b.NewRecordBatch()
			b.Release()
			defer rec.Release()
			ds, err := Tokens(dataset.FromRecords(schema, rec), tok, "body", "input_ids", mem)
			if err != nil {
				t.Fatal(err)
			}
			var rows int
			for out, err := range ds.Records() {
				if err != nil {
					var re *device.RowError
					if !errors.As(err, &re) || re.Row != 4 || re.Column != "body" {
						t.Fatalf("err = %v, want row 4's null text", err)
					}
					break
				}
				ids := out.Column(1).(*array.List)
				vals := ids.ListValues().(*array.Int32)
				for i := range int(out.NumRows()) {
					s, e := ids.ValueOffsets(i)
					got := make([]int64, 0, e-s)
					for _, v := range vals.Int32Values()[s:e] {
						got = append(got, int64(v))
					}
					if want := must(t, tok, texts[i]).IDs; !slices.Equal(got, want) {
						t.Fatalf("row %d: %v, want %v", i, got, want)
					}
					rows++
				}
			}
			if rows != 0 {
				t.Fatalf("a record with a null text yielded %d rows", rows)
			}
		})
	}
	if _, err := Tokens(dataset.FromRecords(arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)), tok, "n", "ids", nil); err == nil {
		t.Fatal("an int64 column was taken as text")
	}
}
