package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/tensor"
)

// predictionsSchema is a job's output: the key, the class and the
// probabilities of the MLP's ten classes.
var predictionsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "class", Type: arrow.PrimitiveTypes.Int64},
	{Name: "probabilities", Type: tensor.Type(10)},
}, nil)

// writerGoals are the Parquet writer's goals: the writer against
// DuckDB's COPY of the same predictions table (in memory on both sides,
// snappy on both), on one thread and on every core (skipped without
// node and npm).
func writerGoals(c *config) []goal {
	if _, err := duckdb.Query("SELECT 1"); err != nil {
		fmt.Printf("(the writer ÷ DuckDB goals are skipped: %v)\n", err)
		return nil
	}
	var recs []arrow.RecordBatch
	table := filepath.Join(c.dir, "predictions.parquet")
	made := false
	ensure := func() {
		if !made {
			recs = predictionRecords(c.mem, c.rows)
			write(c.mem, table, recs)
			made = true
		}
	}
	var gs []goal
	for _, n := range []int{1, runtime.GOMAXPROCS(0)} {
		// DuckDB's COPY uses its threads; the writer, as many encoders
		// (on one thread, none beside the caller).
		target := map[bool]float64{true: 1.5, false: 1.3}[n == 1]
		encoders := map[bool]int{true: 0, false: n}[n == 1]
		gs = append(gs, goal{fmt.Sprintf("files: the Parquet writer ÷ DuckDB's COPY (%d thread(s)), a predictions table (key, class, 10 probabilities) in memory to snappy Parquet", n), atLeast(target), func(r int) float64 {
			ensure()
			out := filepath.Join(c.dir, "written.parquet")
			ours, theirs := pair(r, func() float64 {
				began := time.Now()
				write(c.mem, out, recs, sink.WithEncoders(encoders))
				return time.Since(began).Seconds()
			}, func() float64 {
				secs, _, err := duckdb.TimeAfter("CREATE TABLE t AS SELECT * FROM read_parquet("+duckdb.Quote(table)+")",
					"COPY t TO "+duckdb.Quote(out)+" (FORMAT parquet, COMPRESSION snappy)", n, 1)
				check(err)
				return secs
			})
			return theirs / ours
		}})
	}
	return gs
}

// write writes recs to path as the job's sink does, with opts.
func write(mem memory.Allocator, path string, recs []arrow.RecordBatch, opts ...sink.Option) {
	w, err := sink.Create(path, predictionsSchema, append([]sink.Option{sink.WithAllocator(mem), sink.WithOverwrite(true)}, opts...)...)
	check(err)
	for _, rec := range recs {
		check(w.Write(rec))
	}
	check(w.Commit())
}

// predictionRecords makes rows of predictions, in records of 16,384 rows:
// ids in order, probabilities at random, each row's class its largest.
func predictionRecords(mem memory.Allocator, rows int) []arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(7, 7))
	var out []arrow.RecordBatch
	for off := 0; off < rows; off += 1 << 14 {
		n := min(1<<14, rows-off)
		b := array.NewRecordBuilder(mem, predictionsSchema)
		ids, classes := b.Field(0).(*array.Int64Builder), b.Field(1).(*array.Int64Builder)
		probs := b.Field(2).(*array.FixedSizeListBuilder)
		values := probs.ValueBuilder().(*array.Float32Builder)
		for i := range n {
			ids.Append(int64(off + i))
			probs.Append(true)
			best, class := float32(-1), 0
			for k := range 10 {
				p := rng.Float32()
				values.Append(p)
				if p > best {
					best, class = p, k
				}
			}
			classes.Append(int64(class))
		}
		out = append(out, b.NewRecordBatch())
		b.Release()
	}
	return out
}
