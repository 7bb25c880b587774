package job_test

import (
	"context"
	"math"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/tensor"
)

// A job's outputs, file and folder, read by DuckDB (a reader that shares
// no code with Arrow Go) hold every row once with the class and the
// probabilities the model gives it in memory, bit for bit; 250,000 rows,
// so the file output has two row groups.
func TestDuckDBReadsTheOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("250,000 rows (-short)")
	}
	mem := arrowtest.Allocator(t)
	const rows = 250_000
	input, m := setup(t, mem, rows)

	type prediction struct {
		class int64
		probs [3]uint32 // float32 bits
	}
	want := make([]prediction, rows)
	ds, err := fileset.Read([]string{input}, fileset.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	p, err := predict.New(m, predict.WithBatchSize(256), predict.WithAllocator(mem), predict.WithPassthrough("id"))
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range p.All(context.Background(), ds) {
		if err != nil {
			t.Fatal(err)
		}
		probs, err := tensor.Float32(rec.Column(rec.Schema().FieldIndices("probabilities")[0]), 3)
		if err != nil {
			t.Fatal(err)
		}
		classes := rec.Column(rec.Schema().FieldIndices("class")[0]).(*array.Int64)
		for i, id := range arrowtest.Int64s(t, "id", rec) {
			want[id].class = classes.Value(i)
			for j := range 3 {
				want[id].probs[j] = math.Float32bits(probs[3*i+j])
			}
		}
	}

	dir := t.TempDir()
	for _, out := range []string{filepath.Join(dir, "out.parquet"), filepath.Join(dir, "out") + "/"} {
		cfg := job.Config{Inputs: []string{input}, Output: out, Model: m, ModelID: "test", InputSize: width,
			Keep: []string{"id"}, BatchSize: 256, PartRows: 100_000, Allocator: mem}
		if _, err := job.Run(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		read := out
		if out[len(out)-1] == '/' {
			read += "*.parquet"
		}
		// The probabilities as text: JSON has no negative zero.
		got := duckdbtest.Query(t, "SELECT id, class, list_transform(probabilities, x -> x::VARCHAR) FROM read_parquet("+duckdb.Quote(read)+") ORDER BY id")
		if len(got) != rows {
			t.Fatalf("%s: DuckDB read %d rows, want %d", out, len(got), rows)
		}
		for i, row := range got {
			if row[0].(string) != strconv.Itoa(i) || row[1].(string) != strconv.FormatInt(want[i].class, 10) {
				t.Fatalf("%s: row %d: id %v class %v, want class %d", out, i, row[0], row[1], want[i].class)
			}
			for j, v := range row[2].([]any) {
				f, err := strconv.ParseFloat(v.(string), 32)
				if err != nil {
					t.Fatal(err)
				}
				if math.Float32bits(float32(f)) != want[i].probs[j] {
					t.Fatalf("%s: id %d probability %d: DuckDB reads %v, the model gives %v", out, i, j, f, math.Float32frombits(want[i].probs[j]))
				}
			}
		}
	}
}
