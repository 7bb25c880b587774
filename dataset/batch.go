package dataset

import (
	"fmt"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Batches iterates over the dataset in batches of exactly n rows, the last
// one shorter (never empty). Each batch is borrowed for one iteration. A
// batch inside one source record is a zero-copy slice; one that spans
// records is concatenated into memory from mem.
func (d *Dataset) Batches(mem memory.Allocator, n int) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for s, err := range d.Spans(mem, n) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yieldOwned(yield, s.Slice()) {
				return
			}
		}
	}
}

// Span is one batch as [Dataset.Spans] yields it: rows [Offset,
// Offset+Rows) of Record.
type Span struct {
	Record       arrow.RecordBatch
	Offset, Rows int
}

// Slice returns the span's rows as a record of their own, which the caller
// releases: Record itself, retained, when the span is all of it.
func (s Span) Slice() arrow.RecordBatch {
	if s.Offset == 0 && s.Rows == int(s.Record.NumRows()) {
		s.Record.Retain()
		return s.Record
	}
	return s.Record.NewSlice(int64(s.Offset), int64(s.Offset+s.Rows))
}

// Spans is [Dataset.Batches] without the slicing: it yields where each
// batch lies, in a source record, or (a batch that spans records, and the
// last, short one) in a record of the batch's own. The span's record is
// borrowed for one iteration. It is for a caller that builds a record of
// its own from a batch's columns, as a padder does, and need not pay for a
// sliced record it would drop at once.
func (d *Dataset) Spans(mem memory.Allocator, n int) iter.Seq2[Span, error] {
	return func(yield func(Span, error) bool) {
		if n <= 0 {
			yield(Span{}, fmt.Errorf("%w: got %d", ErrBatchSize, n))
			return
		}
		b := batcher{mem: mem, schema: d.schema, size: n}
		defer b.reset()
		for rec, err := range d.Records() {
			if err != nil {
				yield(Span{}, err)
				return
			}
			if !b.add(rec, yield) {
				return
			}
		}
		if b.rows > 0 {
			batch, err := b.flush()
			if err != nil {
				yield(Span{}, err)
				return
			}
			yieldJoined(yield, batch)
		}
	}
}

// batcher holds the slices of a batch that spans source records.
type batcher struct {
	mem     memory.Allocator
	schema  *arrow.Schema
	size    int
	pending []arrow.RecordBatch // retained slices, in order
	rows    int                 // rows in pending
	index   int                 // index of the next batch, for errors
}

// add cuts rec into batches, yielding every completed one. It reports false
// when the consumer stopped or an error was yielded.
func (b *batcher) add(rec arrow.RecordBatch, yield func(Span, error) bool) bool {
	total := int(rec.NumRows())
	for off := 0; off < total; {
		take := min(b.size-b.rows, total-off)
		if b.rows == 0 && take == b.size {
			// The whole batch lies inside rec: no copy.
			b.index++
			if !yield(Span{Record: rec, Offset: off, Rows: take}, nil) {
				return false
			}
			off += take
			continue
		}
		b.pending = append(b.pending, rec.NewSlice(int64(off), int64(off+take)))
		b.rows += take
		off += take
		if b.rows == b.size {
			batch, err := b.flush()
			if err != nil {
				yield(Span{}, err)
				return false
			}
			if !yieldJoined(yield, batch) {
				return false
			}
		}
	}
	return true
}

// yieldOwned yields rec and releases it afterwards, even if the loop body
// panics.
func yieldOwned(yield func(arrow.RecordBatch, error) bool, rec arrow.RecordBatch) bool {
	defer rec.Release()
	return yield(rec, nil)
}

// yieldJoined yields all of rec, a batch of its own, and releases it
// afterwards, even if the loop body panics.
func yieldJoined(yield func(Span, error) bool, rec arrow.RecordBatch) bool {
	defer rec.Release()
	return yield(Span{Record: rec, Rows: int(rec.NumRows())}, nil)
}

// flush returns the pending rows as one record and empties pending.
func (b *batcher) flush() (arrow.RecordBatch, error) {
	defer b.reset()
	idx := b.index
	b.index++
	rec, err := Concat(b.mem, b.schema, b.pending)
	if err != nil {
		return nil, fmt.Errorf("batch %d: %w", idx, err)
	}
	return rec, nil
}

// Concat joins records of one schema into one record, which the caller
// releases; it copies unless there is only one record, which it retains.
// The records stay the caller's.
func Concat(mem memory.Allocator, schema *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("dataset: no records to concatenate")
	}
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(recs))
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for i := range cols {
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := concatColumn(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("concatenate column %q: %w", schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// reset releases the pending slices.
func (b *batcher) reset() {
	for _, r := range b.pending {
		r.Release()
	}
	clear(b.pending)
	b.pending = b.pending[:0]
	b.rows = 0
}
