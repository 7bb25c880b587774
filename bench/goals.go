package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"gonum.org/v1/gonum/blas"

	"github.com/drainpipe/drainpipe/bench/internal/readsum"
	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
)

// goal is one speed goal: a ratio measured once a round.
type goal struct {
	name   string
	target target
	// round measures the ratio once; r alternates which side runs first.
	round func(r int) float64
}

// target is the value a goal's median must reach: at least, or (atMost)
// at most. A line alone (no target) is measured for a decision it
// informs, not as a goal.
type target struct {
	value  float64
	atMost bool
	line   bool
}

func atLeast(v float64) target { return target{value: v} }
func atMost(v float64) target  { return target{value: v, atMost: true} }

// lineOnly is the target of a line measured without a goal.
var lineOnly = target{line: true}

// met reports whether a median meets the target.
func (t target) met(median float64) bool {
	if t.atMost {
		return median <= t.value
	}
	return median >= t.value
}

func (t target) String() string {
	if t.line {
		return "(line)"
	}
	if t.atMost {
		return fmt.Sprintf("≤ %.2f", t.value)
	}
	return fmt.Sprintf("≥ %.2f", t.value)
}

// pair runs a and b (each returning seconds), in an order that alternates
// with the round.
func pair(r int, a, b func() float64) (ta, tb float64) {
	if r%2 == 0 {
		ta = a()
		tb = b()
	} else {
		tb = b()
		ta = a()
	}
	return ta, tb
}

// bestPair runs a and b k times each, in turns, and returns each one's
// best (least) time.
func bestPair(r, k int, a, b func() float64) (ta, tb float64) {
	ta, tb = math.Inf(1), math.Inf(1)
	for i := range k {
		x, y := pair(r+i, a, b)
		ta, tb = min(ta, x), min(tb, y)
	}
	return ta, tb
}

// goals measures every speed goal in interleaved rounds and prints each
// one's median, lowest and highest. Every ratio is of rates (rows/s):
// above 1, the first side is faster; the server's CPU goals are in µs.
func (c *config) goals(w io.Writer, run goalRun) {
	recs := c.records()
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	mem := dataset.FromRecords(dataset.TensorSchema(width), recs...)
	path := filepath.Join(c.dir, "input.parquet")
	writeParquet(path, mem, c.mem)
	const readRows = 1 << 14
	files := func() *dataset.Dataset {
		ds, err := fileset.Read([]string{path}, fileset.WithAllocator(c.mem), fileset.WithReadRows(readRows))
		check(err)
		return ds
	}
	prefetch := readRows/c.batch + 2
	mlp := c.model("mlp")
	cores := runtime.GOMAXPROCS(0)

	rowSum := c.model("pipeline")
	gs := []goal{
		// A per-batch or per-record cost of the pipeline shows here, where
		// the model costs next to nothing.
		// A run takes tens of milliseconds, where the machine's other work
		// moves a single time by half: each side's best of seven, taken
		// in turns, is stable from run to run.
		{"pipeline: drainpipe ÷ the model alone (a row-sum model, memory, best of 7 a round)", atLeast(0.97), func(r int) float64 {
			dp, alone := bestPair(r, 7, func() float64 { return c.drainpipeWith(rowSum, mem, 0, 1) }, func() float64 { return c.modelOnly(rowSum, recs) })
			return alone / dp
		}},
		{fmt.Sprintf("whole batches: %d sessions ÷ 1 session (MLP, memory)", cores), atLeast(1.5), func(r int) float64 {
			one, many := pair(r, func() float64 { return c.drainpipeWith(mlp, mem, 0, 1) }, func() float64 { return c.drainpipeWith(mlp, mem, 0, cores) })
			return one / many
		}},
		{"kernels: the device (model-only) ÷ its three products alone", atLeast(0.85), func(r int) float64 {
			gemm, device := pair(r, func() float64 { return c.bareGEMM(mlp.(*cpu.MLP), recs) }, func() float64 { return c.modelOnly(mlp, recs) })
			return gemm / device
		}},
		{"kernels: the device (model-only) ÷ a hand loop over the same BLAS", atLeast(1.0), func(r int) float64 {
			hand, device := pair(r, func() float64 { return c.handLoop("mlp", mlp, "memory", recs) }, func() float64 { return c.modelOnly(mlp, recs) })
			return hand / device
		}},
		{"files: the dataset reader ÷ a bare pqarrow read", atLeast(1.0), func(r int) float64 {
			bare, ours := pair(r, func() float64 { return readBare(path, c) }, func() float64 { return readDataset(files()) })
			return bare / ours
		}},
		{"files: Parquet ÷ memory, the job's input side, 1 session", atLeast(0.9), func(r int) float64 {
			fromMem, fromFile := pair(r, func() float64 { return c.drainpipeWith(mlp, mem, 0, 1) }, func() float64 { return c.drainpipeWith(mlp, files(), prefetch, 1) })
			return fromMem / fromFile
		}},
		{fmt.Sprintf("files: Parquet ÷ memory, the job's input side, %d sessions", cores), atLeast(0.9), func(r int) float64 {
			fromMem, fromFile := pair(r, func() float64 { return c.drainpipeWith(mlp, mem, 0, cores) }, func() float64 { return c.drainpipeWith(mlp, files(), prefetch, cores) })
			return fromMem / fromFile
		}},
	}
	// The reader against DuckDB, the peer, each summing every feature
	// value of the same file, on one core and on two (skipped without node
	// and npm); the sums must agree.
	if _, err := duckdb.Query("SELECT 1"); err == nil {
		// drainpipe's file, and the same rows as DuckDB writes them.
		duckFile, wrote := filepath.Join(c.dir, "duckdb.parquet"), false
		for _, file := range []string{"drainpipe's file", "DuckDB's file"} {
			for _, n := range []int{1, cores} {
				gs = append(gs, goal{fmt.Sprintf("files: the dataset reader (%d decoder(s)) ÷ DuckDB (%d thread(s)), summing every value, %s", n, n, file), atLeast(1.5), func(r int) float64 {
					if file == "drainpipe's file" {
						return readerVsDuckDB(r, path, readRows, n)
					}
					if !wrote {
						_, err := duckdb.Query("COPY (SELECT * FROM read_parquet(" + duckdb.Quote(path) + ")) TO " + duckdb.Quote(duckFile) + " (FORMAT parquet)")
						check(err)
						wrote = true
					}
					return readerVsDuckDB(r, duckFile, readRows, n)
				}})
			}
		}
	} else {
		fmt.Fprintf(w, "(the reader ÷ DuckDB goals are skipped: %v)\n", err)
	}
	// The online Batcher's own cost per request, at the batches it forms.
	for _, sessions := range []int{1, cores} {
		gs = append(gs, goal{fmt.Sprintf("online: the Batcher (%d one-row callers) ÷ the Predictor at its mean batch (MLP, %d session group(s))", onlineCallers, sessions), atLeast(0.85),
			func(int) float64 { return c.batcherVsOffline(mlp, recs, sessions) }})
	}
	// The model server against a bare server of the same stack (no
	// batcher, no model): what the server costs above its stack.
	var srv *servers
	defer func() {
		if srv != nil {
			srv.close()
		}
	}()
	start := func() *servers {
		if srv == nil {
			srv = startServers(mlp, c.batch, min(max(time.Duration(c.rows)*time.Microsecond, 200*time.Millisecond), 2*time.Second))
		}
		return srv
	}
	for _, proto := range []string{"gRPC", "REST"} {
		// What the server's stack costs it, at one-row requests: against
		// a bare server answering a fixed response. (At 32 rows this
		// counts the model's work against a server that does none.)
		gs = append(gs, goal{fmt.Sprintf("server: drainpipe ÷ a bare server of the same stack, fixed answer (%s, 1-row requests, %d callers)", proto, onlineCallers), atLeast(0.8),
			func(r int) float64 { return start().ratio(r, proto, 1, false) }})
		// Against what a Go user writes instead: the same stack running
		// the model on each request as it comes. Batching must pay at one
		// row, and cost little at 32.
		// The 1-row goal's bound: drainpipe does all a fixed-answer
		// server does, so it can beat the server running the model by
		// no more than this.
		gs = append(gs, goal{fmt.Sprintf("server: (bound) a fixed-answer bare server ÷ one running the model on each request (%s, 1-row requests, %d callers)", proto, onlineCallers), lineOnly,
			func(r int) float64 { return start().bareRatio(r, proto, 1) }})
		for _, rows := range []int{1, 32} {
			gs = append(gs, goal{fmt.Sprintf("server: drainpipe ÷ a bare server running the model on each request (%s, %d-row requests, %d callers)", proto, rows, onlineCallers), atLeast(map[int]float64{1: 1.5, 32: 0.9}[rows]),
				func(r int) float64 { return start().ratio(r, proto, rows, true) }})
		}
	}
	gs = append(gs, tracingGoals(c, mlp)...)
	gs = append(gs, tokenizeOnceGoals(c)...)
	// The server's CPU a request, with its callers in a process of their
	// own, above the bare server's and the model's share.
	for _, proto := range []string{"gRPC", "REST"} {
		for _, rows := range []int{1, 32} {
			gs = append(gs, goal{name: fmt.Sprintf("server: CPU a request (µs) above a bare server's and the model's share (%s, %d-row requests, %d callers in another process)", proto, rows, onlineCallers),
				target: atMost(30), round: func(r int) float64 { return start().cpuAbove(r, proto, rows) }})
		}
	}
	// A whole job, Parquet to Parquet, against the model alone on the same
	// rows in memory, both with one session a core: what reading, the
	// parts and the writing cost together: 0.90 of the OpenBLAS build,
	// 0.88 of pure Go's.
	jobTarget := 0.88
	if strings.HasPrefix(cpu.BLASName, "OpenBLAS") {
		jobTarget = 0.90
	}
	for _, out := range []string{"folder", "file"} {
		gs = append(gs, goal{fmt.Sprintf("job: Parquet → %s ÷ the model alone (MLP, %d sessions)", out, cores), atLeast(jobTarget), func(r int) float64 {
			alone, job := pair(r, func() float64 { return c.drainpipeWith(mlp, mem, 0, cores) }, func() float64 { return c.job(mlp, path, out, cores) })
			return alone / job
		}})
	}
	gs = append(gs, writerGoals(c)...)
	gs = append(gs, resumeGoals(c)...)
	objects, stopStore := objectGoals(c)
	defer stopStore()
	gs = append(gs, objects...)
	gs = append(gs, seqWasteGoals()...)
	gs = append(gs, tokenizerGoals(c)...)
	if run.onnxOnly {
		// The runtime's goals alone: a build with the onnx tag, after a
		// run of the others in the default build (CI's ONNX step).
		gs = nil
	}
	gs = append(gs, onnxGoals(c, recs)...)
	gs = append(gs, seqONNXGoals(c)...)
	gs = slices.DeleteFunc(gs, func(g goal) bool {
		return !slices.ContainsFunc(strings.Split(run.only, "|"), func(o string) bool { return strings.Contains(g.name, o) })
	})
	if len(gs) == 0 {
		check(fmt.Errorf("no goal's name holds %q", run.only))
	}

	c.report(w, run, measure(gs, run.rounds))
}

// bareGEMM times the MLP's three matrix products alone over the same
// batches: the bound the device's forward step is measured against.
func (c *config) bareGEMM(m *cpu.MLP, recs []arrow.RecordBatch) float64 {
	impl := cpu.DefaultBLAS()
	var scratch [][]float32
	for _, l := range m.Layers {
		scratch = append(scratch, make([]float32, c.batch*l.Out))
	}
	start := time.Now()
	for _, rec := range recs {
		fl := rec.Column(1).(*array.FixedSizeList)
		all := fl.ListValues().(*array.Float32).Float32Values()[fl.Offset()*width:]
		n := int(rec.NumRows())
		for off := 0; off < n; off += c.batch {
			rows := min(c.batch, n-off)
			x := all[off*width : (off+rows)*width]
			for i, l := range m.Layers {
				y := scratch[i][:rows*l.Out]
				impl.Sgemm(blas.NoTrans, blas.NoTrans, rows, l.Out, l.In, 1, x, l.In, l.Weights, l.Out, 0, y, l.Out)
				x = y
			}
		}
	}
	return time.Since(start).Seconds()
}

// readBare times a bare pqarrow read of the file, in the dataset reader's
// record size.
func readBare(path string, c *config) float64 {
	start := time.Now()
	n := 0
	readPqarrow(path, 1<<14, c.mem, func(rec arrow.RecordBatch) { n += int(rec.NumRows()) })
	if n != c.rows {
		check(fmt.Errorf("pqarrow read %d rows of %d", n, c.rows))
	}
	return time.Since(start).Seconds()
}

// readDataset times reading a dataset through.
func readDataset(ds *dataset.Dataset) float64 {
	start := time.Now()
	for _, err := range ds.Records() {
		check(err)
	}
	return time.Since(start).Seconds()
}

// job times a job (job.Run) over the Parquet file at path to a folder or
// file output, with sessions session groups.
func (c *config) job(m device.Model, path, out string, sessions int) float64 {
	output := filepath.Join(c.dir, "job-out")
	if out == "folder" {
		output += "/"
	} else {
		output += ".parquet"
	}
	start := time.Now()
	sum, err := job.Run(context.Background(), job.Config{Inputs: []string{path}, Output: output, Model: m, ModelID: "bench",
		InputSize: width, BatchSize: c.batch, Prefetch: -1, Overwrite: true, Allocator: c.mem,
		Predict: []predict.Option{predict.WithGroups(sessions)}})
	check(err)
	if sum.Rows != int64(c.rows) {
		log.Fatalf("the job wrote %d rows of %d", sum.Rows, c.rows)
	}
	return time.Since(start).Seconds()
}

// readerVsDuckDB times the dataset reader (decoders row groups side by
// side) and DuckDB (as many threads), in the round's order, each summing
// every feature value of the file; checks that the sums agree; and
// returns the ratio of rates.
func readerVsDuckDB(r int, path string, readRows, n int) float64 {
	var sum, peer float64
	ours, theirs := pair(r, func() float64 {
		start := time.Now()
		_, s, err := readsum.Dataset(path, readRows, n)
		check(err)
		sum = s
		return time.Since(start).Seconds()
	}, func() float64 {
		secs, rows, err := duckdb.Time(readsum.SQL(duckdb.Quote(path)), n, 1)
		check(err)
		peer, err = rows[0][0].(json.Number).Float64()
		check(err)
		return secs
	})
	if math.Abs(sum-peer) > 1e-9*math.Max(math.Abs(peer), 1) {
		check(fmt.Errorf("the reader's sum of the features %v, DuckDB's %v", sum, peer))
	}
	return theirs / ours
}
