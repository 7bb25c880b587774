//go:build onnx

package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

const seqEncoder = "seq/testdata/encoder/model.onnx"

// seqONNXGoals compare the process CPU a row of drainpipe's sequence
// plan (sorted windows, buckets, a token budget) with other strategies
// on the same rows, model and one-thread session: the BERT-style encoder
// PyTorch exported for the tests.
func seqONNXGoals(c *config) []goal {
	if onnx.DefaultLibrary() == "" {
		fmt.Println("sequence ONNX goals skipped: no ONNX Runtime library (scripts/fetch-onnxruntime.sh)")
		return nil
	}
	eng, err := onnx.OpenSequence(seqEncoder, onnx.WithIntraOpThreads(1))
	check(err)
	// Two windows' rows; fewer in a short run (the input-order and FIFO
	// strategies cost 20–40 times as much).
	lengths := readLengths()[:min(2*seqWindow, max(c.rows/8, 1024))]
	ds := tokenDataset(c, lengths)
	all := len(lengths)
	run := func(window int, opts ...seq.Option) float64 {
		m, err := seq.New(eng, opts...)
		check(err)
		return seqCPU(c, m, ds, window)
	}
	ours := func() float64 {
		return run(seqWindow, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(seqMaxLen)}))
	}
	planner := seq.WithPlanner(seq.Planner{MaxLength: seqMaxLen})
	gs := []goal{
		{"sequences (ONNX): CPU a row, input order ×32 padded to its longest ÷ drainpipe (buckets, window 4096)", atLeast(3), func(r int) float64 {
			base, dp := pair(r, func() float64 { return run(all, planner, seq.WithPlan(inputOrder(32))) }, ours)
			return base / dp
		}},
		{"sequences (ONNX): CPU a row, a FIFO token budget (TEI-style) ÷ drainpipe", atLeast(3), func(r int) float64 {
			base, dp := pair(r, func() float64 { return run(all, planner, seq.WithPlan(fifoBudget(seq.DefaultMaxTokens))) }, ours)
			return base / dp
		}},
		{"sequences: peak RSS of a predict job whose rows include 200 of 20,000 tokens ÷ without them (window 4096, 1 session)", atMost(1.25), func(int) float64 {
			return seqRSS(c, lengths)
		}},
		{"sequences (ONNX): CPU a row, a global sort padded to each sub-batch's longest ÷ drainpipe", atLeast(0.9), func(r int) float64 {
			ideal, dp := pair(r, func() float64 {
				return run(all, seq.WithPlanner(seq.Planner{MaxLength: seqMaxLen, Multiple: 1}))
			}, ours)
			return ideal / dp
		}},
	}
	return append(append(append(gs, tokenizationShare(c)...), seqMemoryGoals(c)...), embeddingPeerGoals(c)...)
}

// tokenizationShare is the CPU share of tokenization in a text job on a
// MiniLM-sized encoder (6 layers, hidden 384, 12 heads; random weights,
// exported by PyTorch here, as the test encoder is): the golden corpus's
// texts tokenized (WordPiece) ÷ tokenized and run, one thread. Skipped
// without PyTorch (Debian's python3-torch).
func tokenizationShare(c *config) []goal {
	if exec.Command("/usr/bin/python3", "-c", "import torch, onnx").Run() != nil {
		fmt.Println("the tokenization-share goal is skipped: no PyTorch (python3-torch, python3-onnx) to export its encoder")
		return nil
	}
	dir := filepath.Join(c.dir, "minilm")
	if out, err := exec.Command("/usr/bin/python3", "scripts/make-seq-encoder.py", "--out", dir, "--vocab", "30005",
		"--hidden", "384", "--heads", "12", "--layers", "6", "--ffn", "1536").CombinedOutput(); err != nil {
		log.Fatalf("make-seq-encoder: %v\n%s", err, out)
	}
	eng, err := onnx.OpenSequence(filepath.Join(dir, "model.onnx"), onnx.WithIntraOpThreads(1))
	check(err)
	tok, err := tokenizer.LoadFile("tokenizer/testdata/bert-uncased.json")
	check(err)
	texts := goldenTexts("tokenizer/testdata/golden-bert.jsonl.gz")
	return []goal{{"tokenizers: tokenization ÷ a text job's CPU, MiniLM-sized encoder (6 × 384), WordPiece, one thread", atMost(0.10), func(int) float64 {
		before := cpuSeconds()
		ids := make([][]int64, len(texts))
		for i, t := range texts {
			e, err := tok.Encode(t)
			check(err)
			ids[i] = e.IDs
		}
		tokenize := cpuSeconds() - before
		m, err := seq.New(eng, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(seqMaxLen)}))
		check(err)
		model := seqCPU(c, m, idsDataset(c, ids), seqWindow)
		return tokenize / (tokenize + model)
	}}}
}

// idsDataset makes rows of the given token ids, held for the rest of the
// run.
func idsDataset(c *config, rows [][]int64) *dataset.Dataset {
	schema := arrow.NewSchema([]arrow.Field{{Name: seq.InputIDs, Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	b := array.NewRecordBuilder(c.mem, schema)
	defer b.Release()
	list := b.Field(0).(*array.ListBuilder)
	vals := list.ValueBuilder().(*array.Int64Builder)
	for _, r := range rows {
		list.Append(true)
		vals.AppendValues(r[:min(len(r), seqMaxLen)], nil)
	}
	return dataset.FromRecords(schema, b.NewRecordBatch())
}

// seqRSS returns the peak resident memory of a `drainpipe predict` job
// of the encoder over rows of the given lengths with 200 rows of 20,000
// tokens among them, divided by that of the same job without them: the
// padded tensors are bounded by the token budget, so rows far longer than
// the model's 512 positions cost their input bytes, not longest × rows.
// One session: with two, the peak is whether both happen to run their
// largest sub-batch at once (0.98–1.26 in three rounds).
func seqRSS(c *config, lengths []int) float64 {
	bin := seqBinary(c)
	long := slices.Clone(lengths)
	for i := range 200 {
		long[(i*7919)%len(long)] = 20000
	}
	rss := func(name string, lens []int) float64 {
		in := filepath.Join(c.dir, name+".parquet")
		if _, err := os.Stat(in); err != nil {
			writeParquet(in, tokenDataset(c, lens), c.mem)
		}
		return childRSS(bin, "predict", "--model", filepath.Dir(seqEncoder), "--input", in, "--output", filepath.Join(c.dir, name+"-out.parquet"),
			"--overwrite", "--quiet", "--window", "4096", "--sessions", "1")
	}
	return rss("seq-long", long) / rss("seq-short", lengths)
}

// seqBinary is the CLI built with ONNX Runtime, built once a run.
func seqBinary(c *config) string {
	bin := filepath.Join(c.dir, "drainpipe-onnx")
	if _, err := os.Stat(bin); err != nil {
		out, err := exec.Command("go", "build", "-tags", "onnx", "-o", bin, "./cmd/drainpipe").CombinedOutput()
		if err != nil {
			log.Fatalf("build: %v\n%s", err, out)
		}
	}
	return bin
}

// tokenDataset makes rows of token ids of the given lengths, held for
// the rest of the run.
func tokenDataset(c *config, lengths []int) *dataset.Dataset {
	schema := arrow.NewSchema([]arrow.Field{{Name: seq.InputIDs, Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	b := array.NewRecordBuilder(c.mem, schema)
	defer b.Release()
	list := b.Field(0).(*array.ListBuilder)
	vals := list.ValueBuilder().(*array.Int32Builder)
	for i, n := range lengths {
		list.Append(true)
		for j := range n {
			vals.Append(int32(104 + (i*31+j*7)%896)) // within the encoder's vocabulary, past its special tokens
		}
	}
	// Borrowed by the dataset for the rest of the run.
	return dataset.FromRecords(schema, b.NewRecordBatch())
}

// seqCPU runs the model over ds in windows and returns the process's CPU
// seconds.
func seqCPU(c *config, m *seq.Model, ds *dataset.Dataset, window int) float64 {
	p, err := predict.New(m, predict.WithBatchSize(window), predict.WithAllocator(c.mem))
	check(err)
	before := cpuSeconds()
	for r := range p.Predict(context.Background(), ds) {
		check(r.Err)
		r.Record.Release()
	}
	return cpuSeconds() - before
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
