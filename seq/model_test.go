package seq_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/head"
	"github.com/drainpipe/drainpipe/internal/testing/seqtest"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
)

const width = 8

// rows returns n rows of token ids, their lengths drawn from the
// committed long-tail distribution; row i's ids depend on i.
func rows(t testing.TB, n int) [][]int64 {
	t.Helper()
	f, err := os.Open("testdata/lengths.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var out [][]int64
	for i := 0; i < n && sc.Scan(); i++ {
		l, _ := strconv.Atoi(sc.Text())
		ids := make([]int64, l)
		for j := range ids {
			ids[j] = int64((i*31 + j*7) % 1000)
		}
		out = append(out, ids)
	}
	return out
}

var tokenSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

// records makes records of chunk rows; a nil row is a null list.
func records(mem memory.Allocator, data [][]int64, chunk int) []arrow.RecordBatch {
	var out []arrow.RecordBatch
	for start := 0; start < len(data); start += chunk {
		b := array.NewRecordBuilder(mem, tokenSchema)
		list := b.Field(1).(*array.ListBuilder)
		vals := list.ValueBuilder().(*array.Int32Builder)
		for i := start; i < min(start+chunk, len(data)); i++ {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if data[i] == nil {
				list.AppendNull()
				continue
			}
			list.Append(true)
			for _, id := range data[i] {
				vals.Append(int32(id))
			}
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}

type result struct {
	keys                  []int64
	pooled, sentence, lgt [][]float32
	labels                []int64
}

// run predicts data with the model in windows of window rows.
func run(t *testing.T, mem memory.Allocator, m *seq.Model, data [][]int64, window int, opts ...predict.Option) (result, error) {
	t.Helper()
	recs := records(mem, data, 1000)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	hm, err := head.Wrap(m, head.Head{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.New(hm, append([]predict.Option{predict.WithBatchSize(window), predict.WithAllocator(mem), predict.WithPassthrough("key")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var res result
	var failed error
	for r := range p.Predict(context.Background(), dataset.FromRecords(tokenSchema, recs...)) {
		if r.Err != nil {
			failed = r.Err
			continue
		}
		rec := r.Record
		res.keys = append(res.keys, rec.Column(0).(*array.Int64).Int64Values()...)
		vectors := func(name string) [][]float32 {
			col := rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.FixedSizeList)
			w := int(col.DataType().(*arrow.FixedSizeListType).Len())
			vals := col.ListValues().(*array.Float32).Float32Values()
			var out [][]float32
			for i := range col.Len() {
				out = append(out, append([]float32(nil), vals[i*w:(i+1)*w]...))
			}
			return out
		}
		res.pooled = append(res.pooled, vectors("embedding")...)
		res.sentence = append(res.sentence, vectors("sentence_embedding")...)
		res.lgt = append(res.lgt, vectors("logits")...)
		res.labels = append(res.labels, rec.Column(rec.Schema().FieldIndices("class")[0]).(*array.Int64).Int64Values()...)
		rec.Release()
	}
	return res, failed
}

func near(a, b []float32, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > tol || math.IsNaN(float64(a[i])) {
			return false
		}
	}
	return true
}

// TestWindowsMatchRowsAlone runs the long-tail rows under windows,
// buckets, budgets, replicas and session groups: one output row per input
// row, in order, each within 1e-6 of the row run alone, unpadded.
func TestWindowsMatchRowsAlone(t *testing.T) {
	data := rows(t, 1500)
	data[3] = []int64{} // an empty list is a valid row
	const maxLen = 512
	planners := map[string]seq.Planner{
		"default buckets": {Buckets: seq.DefaultBuckets(maxLen)},
		"no buckets":      {MaxLength: maxLen},
		"small budget":    {Buckets: []int{16, 64, 512}, MaxTokens: 256},
		"fixed sizes":     {Buckets: seq.DefaultBuckets(maxLen), BatchSizes: []int{4, 16}, MaxTokens: 4096},
	}
	for name, pl := range planners {
		for _, cfg := range []struct{ window, replicas, groups int }{{4096, 1, 1}, {64, 1, 1}, {7, 1, 1}, {256, 2, 1}, {128, 1, 2}} {
			t.Run(fmt.Sprintf("%s/w%d/r%d/g%d", name, cfg.window, cfg.replicas, cfg.groups), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				eng := &seqtest.Engine{Width: width}
				var declared []seq.Shape
				eng.Shapes = func(s []seq.Shape) { declared = s }
				m, err := seq.New(eng, seq.WithPlanner(pl))
				if err != nil {
					t.Fatal(err)
				}
				res, err := run(t, mem, m, data, cfg.window, predict.WithReplicas(cfg.replicas), predict.WithGroups(cfg.groups))
				if err != nil {
					t.Fatal(err)
				}
				if len(res.keys) != len(data) {
					t.Fatalf("%d rows out, %d in", len(res.keys), len(data))
				}
				truncated := 0
				for i, k := range res.keys {
					if k != int64(i) {
						t.Fatalf("row %d has key %d", i, k)
					}
					ids := data[i]
					if len(ids) > maxLen {
						ids, truncated = ids[:maxLen], truncated+1
					}
					pooled, sentence, logits := seqtest.Reference(width, ids)
					if !near(res.pooled[i], pooled, 1e-6) || !near(res.sentence[i], sentence, 1e-6) || !near(res.lgt[i], logits, 1e-6) {
						t.Fatalf("row %d (%d tokens): embedding %v, alone %v", i, len(ids), res.pooled[i], pooled)
					}
				}
				st := m.Stats()
				if st.Rows != int64(len(data)) || st.Truncated != int64(truncated) {
					t.Errorf("stats: %d rows, %d truncated; want %d, %d", st.Rows, st.Truncated, len(data), truncated)
				}
				full := m.Planner()
				// A row over the budget alone runs alone (or in the fewest rows
				// a sub-batch has).
				fewest := 1
				if len(full.BatchSizes) > 0 {
					fewest = full.BatchSizes[0]
				}
				limit := max(full.MaxTokens, maxLen*fewest)
				if peak := eng.Peak.Load(); peak > int64(limit) {
					t.Errorf("peak sub-batch of %d token slots, budget %d", peak, full.MaxTokens)
				}
				if pl.Buckets != nil && len(declared) == 0 {
					t.Error("the engine was told no shapes")
				}
				for sh := range st.Shapes {
					if pl.Buckets != nil && !contains(declared, sh) {
						t.Errorf("ran %s, not declared", sh)
					}
				}
				if got, want := eng.Started.Load(), eng.Down.Load(); got != want || got == 0 {
					t.Errorf("%d sessions started, %d shut down", got, want)
				}
				t.Logf("padding waste %.3f over %d sub-batches, %d shapes", st.PaddingWaste(), st.SubBatches, len(st.Shapes))
			})
		}
	}
}

func contains(s []seq.Shape, x seq.Shape) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestBadRowsAreSetAside: a null list, a negative id and an id past the
// vocabulary are each one set-aside row naming it; the others are
// predicted, in order.
func TestBadRowsAreSetAside(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data := rows(t, 200)
	data[5] = nil
	data[17] = []int64{101, -4, 102}
	data[40] = []int64{101, 999999, 102}
	m, err := seq.New(&seqtest.Engine{Width: width, Vocab: 1000}, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(512)}))
	if err != nil {
		t.Fatal(err)
	}
	var aside []error
	var asideKeys []int64
	res, err := run(t, mem, m, data, 64, predict.WithSetAside(func(row arrow.RecordBatch, err error) {
		aside = append(aside, err)
		asideKeys = append(asideKeys, row.Column(0).(*array.Int64).Value(0))
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.keys) != len(data)-3 || len(aside) != 3 {
		t.Fatalf("%d rows predicted, %d set aside, of %d", len(res.keys), len(aside), len(data))
	}
	if asideKeys[0] != 5 || asideKeys[1] != 17 || asideKeys[2] != 40 {
		t.Fatalf("set aside %v, want rows 5, 17, 40", asideKeys)
	}
	if !errors.Is(aside[0], seq.ErrNullRow) || !errors.Is(aside[1], seq.ErrBadToken) || !errors.Is(aside[2], seqtest.ErrVocab) {
		t.Fatalf("reasons: %v", aside)
	}
	var re *device.RowError
	if !errors.As(aside[0], &re) || re.Column != "input_ids" {
		t.Fatalf("the null row's error names no column: %v", aside[0])
	}
}

// TestNullRowFailsWithoutSetAside: without set-aside the first bad row
// ends the run with an error naming its row and column.
func TestNullRowFailsWithoutSetAside(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data := rows(t, 100)
	data[70] = nil
	m, err := seq.New(&seqtest.Engine{Width: width}, seq.WithPlanner(seq.Planner{MaxLength: 512}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(t, mem, m, data, 32)
	var re *device.RowError
	if !errors.As(err, &re) || re.Row != 70 || !errors.Is(err, seq.ErrNullRow) {
		t.Fatalf("err = %v, want row 70's null list", err)
	}
}

// TestBadTokenBeforeAnySubBatch: a window's ids are checked before any
// of its sub-batches runs, so an id past the vocabulary in the window's
// longest row fails the window with nothing run.
func TestBadTokenBeforeAnySubBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data := rows(t, 64)
	long := slices.Repeat([]int64{7}, 400)
	long[399] = 5000
	data[40] = long
	e := &seqtest.Engine{Width: width}
	m, err := seq.New(e, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(512)}), seq.WithVocab(1000))
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(t, mem, m, data, 64)
	var re *device.RowError
	if !errors.As(err, &re) || re.Row != 40 || !errors.Is(err, seq.ErrBadToken) || e.Runs.Load() != 0 {
		t.Fatalf("err = %v after %d sub-batches, want row 40's bad id after none", err, e.Runs.Load())
	}
}

// TestWindowNotPadded: a window shorter than --window runs as it is
// (seq.Model is a device.ShortBatcher): no padding row is made, even at a
// window of 2^30 rows.
func TestWindowNotPadded(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	m, err := seq.New(&seqtest.Engine{Width: width}, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(512)}))
	if err != nil {
		t.Fatal(err)
	}
	for _, window := range []int{4096, 1 << 30} {
		var st predict.Stats
		res, err := run(t, mem, m, rows(t, 300), window, predict.WithStats(func(s predict.Stats) { st = s }))
		if err != nil || len(res.keys) != 300 || st.PaddedRows != 0 {
			t.Fatalf("window %d: %d rows, %d padding rows, %v", window, len(res.keys), st.PaddedRows, err)
		}
	}
}

// TestWarmUp: a session of a WarmUpper engine, of a model made
// WithWarmUp, runs its largest declared shape once at start, every row
// padding, and its windows' outputs are those of a session that did
// not; without either, a session runs nothing at start.
func TestWarmUp(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data := rows(t, 200)
	var outs [3]result
	for i, c := range []struct{ engine, model bool }{{false, true}, {true, false}, {true, true}} {
		warm := c.engine && c.model
		e := &seqtest.Engine{Width: width, Warm: c.engine}
		opts := []seq.Option{seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(512)})}
		if c.model {
			opts = append(opts, seq.WithWarmUp())
		}
		m, err := seq.New(e, opts...)
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.Start(t.Context(), device.SessionConfig{BatchSize: 64, Replicas: 1, Sessions: 1, Allocator: mem, Schema: tokenSchema})
		if err != nil {
			t.Fatal(err)
		}
		largest := 0
		for _, sh := range m.Shapes() {
			largest = max(largest, sh.Slots())
		}
		if runs, peak := e.Runs.Load(), e.Peak.Load(); (warm && (runs != 1 || peak != int64(largest))) || (!warm && runs != 0) {
			t.Fatalf("warm %v: %d runs, peak %d slots at start; the largest shape has %d", warm, runs, peak, largest)
		}
		if err := s.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if outs[i], err = run(t, mem, m, data, 64); err != nil {
			t.Fatal(err)
		}
	}
	for r := range data {
		if !near(outs[0].pooled[r], outs[2].pooled[r], 0) || !near(outs[1].pooled[r], outs[2].pooled[r], 0) {
			t.Fatalf("row %d differs after a warm-up", r)
		}
	}
}

// TestRefuseLong sets a row longer than the longest bucket aside instead
// of truncating it.
func TestRefuseLong(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data := rows(t, 50)
	data[9] = make([]int64, 100000)
	m, err := seq.New(&seqtest.Engine{Width: width}, seq.WithPlanner(seq.Planner{Buckets: []int{64, 128}}), seq.WithRefuseLong())
	if err != nil {
		t.Fatal(err)
	}
	var aside []int64
	res, err := run(t, mem, m, data, 16, predict.WithSetAside(func(row arrow.RecordBatch, err error) {
		if !errors.Is(err, seq.ErrTooLong) {
			t.Errorf("set aside for %v", err)
		}
		aside = append(aside, row.Column(0).(*array.Int64).Value(0))
	}))
	if err != nil {
		t.Fatal(err)
	}
	long := 0
	for _, d := range data {
		if len(d) > 128 {
			long++
		}
	}
	if len(aside) != long || len(res.keys) != len(data)-long {
		t.Fatalf("%d set aside (%v), %d predicted; %d rows are too long", len(aside), aside, len(res.keys), long)
	}
}

// TestNotATokenColumn refuses a float column given as tokens at start.
func TestNotATokenColumn(t *testing.T) {
	m, err := seq.New(&seqtest.Engine{Width: width}, seq.WithPlanner(seq.Planner{MaxLength: 64}), seq.WithTokens("features"))
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "features", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32)}}, nil)
	_, err = m.Start(context.Background(), device.SessionConfig{BatchSize: 8, Schema: schema})
	if !errors.Is(err, seq.ErrTokens) {
		t.Fatalf("err = %v, want ErrTokens", err)
	}
}

// TestWithPlan runs another strategy's plan (input order, 32 rows padded
// to their longest) through the same model: the same outputs.
func TestWithPlan(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data := rows(t, 300)
	inOrder := func(lengths []int) ([]seq.SubBatch, error) {
		var out []seq.SubBatch
		for i := 0; i < len(lengths); i += 32 {
			sb := seq.SubBatch{Shape: seq.Shape{Tokens: 1}}
			for r := i; r < min(i+32, len(lengths)); r++ {
				sb.Rows = append(sb.Rows, r)
				sb.Shape.Tokens = max(sb.Shape.Tokens, lengths[r])
			}
			sb.Shape.Rows = len(sb.Rows)
			out = append(out, sb)
		}
		return out, nil
	}
	results := make([]result, 2)
	for i, opts := range [][]seq.Option{{}, {seq.WithPlan(inOrder)}} {
		m, err := seq.New(&seqtest.Engine{Width: width}, append(opts, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(512)}))...)
		if err != nil {
			t.Fatal(err)
		}
		if results[i], err = run(t, mem, m, data, 128); err != nil {
			t.Fatal(err)
		}
		if i == 1 && m.Shapes() != nil {
			t.Error("a model with its own plan declares shapes")
		}
	}
	for i := range data {
		if !near(results[0].pooled[i], results[1].pooled[i], 1e-6) {
			t.Fatalf("row %d: %v planned, %v in input order", i, results[0].pooled[i], results[1].pooled[i])
		}
	}
}

// TestLeftPadding pads rows at their start (decoder models): position
// ids count from each row's first token, so every row still gets what it
// gets alone.
func TestLeftPadding(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	data := rows(t, 300)
	for _, pl := range []seq.Planner{{Buckets: seq.DefaultBuckets(512)}, {MaxLength: 512}} {
		m, err := seq.New(&seqtest.Engine{Width: width}, seq.WithPlanner(pl), seq.WithLeftPadding(), seq.WithPadID(3))
		if err != nil {
			t.Fatal(err)
		}
		res, err := run(t, mem, m, data, 100)
		if err != nil {
			t.Fatal(err)
		}
		for i, ids := range data {
			if len(ids) > 512 {
				ids = ids[:512]
			}
			pooled, _, _ := seqtest.Reference(width, ids)
			if len(ids) > 0 && !near(res.pooled[i], pooled, 1e-6) {
				t.Fatalf("row %d: %v left-padded, %v alone", i, res.pooled[i], pooled)
			}
		}
	}
}

// TestWithText: a model that encodes a text column itself gives what
// the same ids in a token column give; a null text is a row error.
func TestWithText(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	texts := []string{"hello", "", "a longer text of words", "x"}
	encode := func(s string) []int64 {
		ids := []int64{101}
		for _, b := range []byte(s) {
			ids = append(ids, int64(b))
		}
		return append(ids, 102)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "body", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	b.Field(0).(*array.StringBuilder).AppendValues(texts, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	m, err := seq.New(&seqtest.Engine{Width: width}, seq.WithText("body", func(s string) ([]int64, bool, error) { return encode(s), len(s) > 10, nil }), seq.WithPlanner(seq.Planner{Buckets: []int{8, 32}}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.New(m, predict.WithBatchSize(8), predict.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for r := range p.Predict(context.Background(), dataset.FromRecords(schema, rec)) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for k := range int(r.Record.NumRows()) {
			want, _, _ := seqtest.Reference(width, encode(texts[i]))
			col := r.Record.Column(r.Record.Schema().FieldIndices("embedding")[0]).(*array.FixedSizeList)
			got := col.ListValues().(*array.Float32).Float32Values()[k*width : (k+1)*width]
			if !near(got, want, 1e-6) {
				t.Fatalf("text %d: %v, want %v", i, got, want)
			}
			i++
		}
		r.Record.Release()
	}
	if i != len(texts) {
		t.Fatalf("%d rows out", i)
	}
	// The text the encoder cut is a truncated row, as a row the model cuts.
	if st := m.Stats(); st.Truncated != 1 {
		t.Fatalf("%d rows counted truncated, want the one the encoder cut", st.Truncated)
	}

	b = array.NewRecordBuilder(mem, schema)
	b.Field(0).(*array.StringBuilder).AppendValues(texts, []bool{true, true, false, true})
	nulls := b.NewRecordBatch()
	b.Release()
	defer nulls.Release()
	var err2 error
	for r := range p.Predict(context.Background(), dataset.FromRecords(schema, nulls)) {
		if r.Err != nil {
			err2 = r.Err
			continue
		}
		r.Record.Release()
	}
	var re *device.RowError
	if !errors.As(err2, &re) || re.Row != 2 || re.Column != "body" {
		t.Fatalf("a null text: %v, want a row error at row 2 of column body", err2)
	}
}
