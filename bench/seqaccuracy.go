//go:build onnx

package main

import (
	"context"
	"encoding/json"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// sizedAccuracy is the largest difference, over every element, between
// drainpipe's mean-pooled embeddings and PyTorch's for the golden
// corpus's first 256 texts (WordPiece, truncated at 512 tokens) on an
// encoder of the given size PyTorch exports here with random weights,
// each text run alone there and in windows of sub-batches padded
// together here. The test encoder (hidden 32) is held to 1e-5 in the
// tests; this holds a real width and depth to it.
func sizedAccuracy(c *config, hidden, heads, layers, ffn int) float64 {
	tok, err := tokenizer.LoadFile("tokenizer/testdata/bert-uncased.json")
	check(err)
	check(tok.SetTruncation(&tokenizer.Truncation{MaxLength: seqMaxLen}))
	var rows [][]int64
	for _, text := range goldenTexts("tokenizer/testdata/golden-bert.jsonl.gz")[:256] {
		e, err := tok.Encode(text)
		check(err)
		rows = append(rows, e.IDs)
	}
	dir := filepath.Join(c.dir, "accuracy-"+strconv.Itoa(hidden))
	check(os.MkdirAll(dir, 0o755))
	ids := filepath.Join(dir, "rows.json")
	data, err := json.Marshal(map[string]any{"input_ids": rows})
	check(err)
	check(os.WriteFile(ids, data, 0o644))
	args := []string{"scripts/make-seq-encoder.py", "--out", dir, "--vocab", "30005", "--hidden", strconv.Itoa(hidden), "--heads", strconv.Itoa(heads),
		"--layers", strconv.Itoa(layers), "--ffn", strconv.Itoa(ffn), "--reference", ids}
	if out, err := exec.Command("/usr/bin/python3", args...).CombinedOutput(); err != nil {
		log.Fatalf("make-seq-encoder: %v\n%s", err, out)
	}
	var ref struct {
		Means [][]float64 `json:"last_hidden_state_mean"`
	}
	data, err = os.ReadFile(filepath.Join(dir, "torch.json"))
	check(err)
	check(json.Unmarshal(data, &ref))
	eng, err := onnx.OpenSequence(filepath.Join(dir, "model.onnx"), onnx.WithIntraOpThreads(1))
	check(err)
	m, err := seq.New(eng, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(seqMaxLen)}))
	check(err)
	p, err := predict.New(m, predict.WithBatchSize(64), predict.WithAllocator(c.mem))
	check(err)
	worst, row := 0.0, 0
	for r := range p.Predict(context.Background(), idsDataset(c, rows)) {
		check(r.Err)
		col := r.Record.Column(r.Record.Schema().FieldIndices("embedding")[0]).(*array.FixedSizeList)
		vals := col.ListValues().(*array.Float32).Float32Values()
		for i := range int(r.Record.NumRows()) {
			for j, want := range ref.Means[row] {
				worst = max(worst, math.Abs(float64(vals[i*hidden+j])-want))
			}
			row++
		}
		r.Record.Release()
	}
	if row != len(rows) {
		log.Fatalf("accuracy: %d rows out of %d", row, len(rows))
	}
	return worst
}
