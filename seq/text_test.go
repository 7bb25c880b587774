package seq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/seqtest"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
)

// A window's texts stop being tokenized once its context ends: a
// request's texts are not encoded for a caller that has gone.
func TestWithTextStopsWithTheContext(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{{Name: "body", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b", "c", "d", "e", "f", "g", "h"}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	encoded := 0
	m, err := seq.New(&seqtest.Engine{Width: width}, seq.WithText("body", func(s string) ([]int64, bool, error) {
		if encoded++; encoded == 3 {
			cancel()
		}
		return []int64{101, int64(s[0]), 102}, false, nil
	}), seq.WithPlanner(seq.Planner{Buckets: []int{8}}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.New(m, predict.WithBatchSize(8), predict.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for r := range p.Predict(ctx, dataset.FromRecords(schema, rec)) {
		if r.Err != nil && !errors.Is(r.Err, context.Canceled) {
			t.Fatal(r.Err)
		}
		if r.Record != nil {
			rows += int(r.Record.NumRows())
			r.Record.Release()
		}
	}
	if encoded != 3 || rows != 0 {
		t.Fatalf("%d of 8 texts encoded, %d rows out; want 3 and none", encoded, rows)
	}
}
