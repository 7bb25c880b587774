package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// Rows encoded on several goroutines come out in order, as on one, and
// the first bad row (not the first to fail) is the one named.
func TestEncodeRowsInOrder(t *testing.T) {
	tok, err := LoadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := array.NewStringBuilder(mem)
	defer b.Release()
	for i := range 1000 {
		b.Append(strings.Repeat("word ", i%37) + fmt.Sprint(i))
	}
	texts := b.NewArray()
	defer texts.Release()
	one, err := encodeRows(tok, texts, "body", 0, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	many, err := encodeRows(tok, texts, "body", 0, 7, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range one {
		if !slices.Equal(one[i].e.IDs, many[i].e.IDs) || !slices.Equal(one[i].e.Offsets, many[i].e.Offsets) || one[i].decoded != many[i].decoded || one[i].decoded == "" {
			t.Fatalf("row %d differs on 7 goroutines", i)
		}
	}
	for _, s := range []string{"a", "b"} {
		b.Append(s)
	}
	b.AppendNull()
	b.Append("c")
	b.AppendNull()
	bad := b.NewArray()
	defer bad.Release()
	_, err = encodeRows(tok, bad, "body", 100, 3, false)
	var re *device.RowError
	if !errors.As(err, &re) || re.Row != 102 || re.Column != "body" {
		t.Fatalf("err = %v, want row 102's null text", err)
	}
}
