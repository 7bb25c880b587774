package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
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
	one, errs := encodeRows(tok, rowsIn{texts: texts, column: "body"}, 1, true)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	many, errs := encodeRows(tok, rowsIn{texts: texts, column: "body"}, 7, true)
	if err := errors.Join(errs...); err != nil {
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
	_, errs = encodeRows(tok, rowsIn{texts: bad, column: "body", first: 100}, 3, false)
	for i, want := range []int64{-1, -1, 102, -1, 104} {
		var re *device.RowError
		if got := errors.As(errs[i], &re); got != (want >= 0) || (got && (re.Row != want || re.Column != "body")) {
			t.Fatalf("row %d: err = %v, want row %d's null text", i, errs[i], want)
		}
	}
}

// WithPair encodes each row with its pair, as EncodePair does, type ids
// included; a text past WithMaxTextBytes is a row error naming the
// ceiling, and a null pair one naming the pair column.
func TestEncodingsPairsAndCeiling(t *testing.T) {
	tok, err := LoadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "q", Type: arrow.BinaryTypes.String}, {Name: "p", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	record := func(qs []string, ps []*string) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for i := range qs {
			b.Field(0).(*array.StringBuilder).Append(qs[i])
			if ps[i] == nil {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.StringBuilder).Append(*ps[i])
			}
		}
		return b.NewRecordBatch()
	}
	str := func(s string) *string { return &s }
	qs := []string{"what is a cat", "where", strings.Repeat("long ", 30)}
	ps := []*string{str("a cat is an animal"), str(""), str("short")}
	rec := record(qs, ps)
	defer rec.Release()
	ds, err := Encodings(dataset.FromRecords(schema, rec), tok, "q", Columns{IDs: "ids", TypeIDs: "types"}, mem, WithPair("p"))
	if err != nil {
		t.Fatal(err)
	}
	for out, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		for i := range qs {
			want, err := tok.EncodePair(qs[i], *ps[i])
			if err != nil {
				t.Fatal(err)
			}
			if got := arrowtest.IntList(t, out, "ids", i); !slices.Equal(got, want.IDs) {
				t.Errorf("pair %d: ids %v, want %v", i, got, want.IDs)
			}
			if got := arrowtest.IntList(t, out, "types", i); !slices.Equal(got, want.TypeIDs) {
				t.Errorf("pair %d: type ids %v, want %v", i, got, want.TypeIDs)
			}
		}
	}
	for _, c := range []struct {
		ps     []*string
		opts   []Option
		row    int64
		column string
		err    error
	}{
		{[]*string{str("a"), nil, str("c")}, nil, 1, "p", nil},
		{ps, []Option{WithMaxTextBytes(100)}, 2, "q", ErrTextTooLong},
	} {
		bad := record(qs, c.ps)
		ds, err := Encodings(dataset.FromRecords(schema, bad), tok, "q", Columns{IDs: "ids"}, mem, append(c.opts, WithPair("p"))...)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range ds.Records() {
			var re *device.RowError
			if !errors.As(err, &re) || re.Row != c.row || re.Column != c.column || (c.err != nil && !errors.Is(err, c.err)) {
				t.Errorf("err = %v, want row %d, column %q, %v", err, c.row, c.column, c.err)
			}
			break
		}
		bad.Release()
	}
}

// With WithRowErrors, a row the tokenizer refuses goes to the function
// with its index and is left out of the output; the other rows are
// encoded as without it, in order. WithTruncatedCount counts the rows
// the truncation cut.
func TestEncodingsRowErrorsLeaveTheRowOut(t *testing.T) {
	tok, err := LoadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "q", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	texts := []string{"a cat", "", strings.Repeat("x", 300), "a dog", ""}
	for i, s := range texts {
		if i == 1 {
			b.Field(0).AppendNull()
			continue
		}
		b.Field(0).(*array.StringBuilder).Append(s)
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	var refused []int
	var cut atomic.Int64
	if err := tok.SetTruncation(&Truncation{MaxLength: 3}); err != nil {
		t.Fatal(err)
	}
	ds, err := Encodings(dataset.FromRecords(schema, rec), tok, "q", Columns{IDs: "ids"}, mem, WithMaxTextBytes(100), WithTruncatedCount(&cut),
		WithRowErrors(func(r arrow.RecordBatch, i int, err error) {
			if r != rec || !errors.As(err, new(*device.RowError)) {
				t.Errorf("row %d: record %p, %v", i, r, err)
			}
			refused = append(refused, i)
		}))
	if err != nil {
		t.Fatal(err)
	}
	for out, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		kept := []int{0, 3, 4}
		if out.NumRows() != int64(len(kept)) {
			t.Fatalf("%d rows out, want %d", out.NumRows(), len(kept))
		}
		for j, i := range kept {
			want, err := tok.Encode(texts[i])
			if err != nil {
				t.Fatal(err)
			}
			if got := arrowtest.IntList(t, out, "ids", j); !slices.Equal(got, want.IDs) {
				t.Errorf("row %d: ids %v, want text %d's %v", j, got, i, want.IDs)
			}
			if got := out.Column(0).(*array.String).Value(j); got != texts[i] {
				t.Errorf("row %d: text %q, want %q", j, got, texts[i])
			}
		}
	}
	if !slices.Equal(refused, []int{1, 2}) {
		t.Fatalf("refused %v, want the null and the long text", refused)
	}
	// [CLS] a cat [SEP] and [CLS] a dog [SEP] cut to 3 tokens; "" not.
	if cut.Load() != 2 {
		t.Fatalf("%d rows counted truncated, want 2", cut.Load())
	}
}
