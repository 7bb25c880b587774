//go:build onnx

package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset"
)

// longRowRSS returns the peak resident memory of a text job (`predict
// --model DIR --text-column`, one session) over the golden corpus's
// first 256 texts and one text of 16 MB, divided by the same job with
// that text cut to 16 KB: a text is read from the head its truncation
// needs, so its length costs its input bytes, not its tokenization.
// model is the encoder's ONNX file; the folder beside it gets the
// WordPiece tokenizer its vocabulary was made for.
func longRowRSS(c *config, model string, hidden int) float64 {
	dir := textFolder(model, hidden)
	texts := goldenTexts("tokenizer/testdata/golden-bert.jsonl.gz")[:256]
	words := strings.Repeat("the licence grants you the rights described below in full ", 16<<20/59)
	rss := func(name string, long string) float64 {
		in := filepath.Join(c.dir, fmt.Sprintf("%s-%d.parquet", name, hidden))
		if _, err := os.Stat(in); err != nil { // written in the first round
			writeParquet(in, textDataset(c, append(texts[:128:128], append([]string{long}, texts[128:]...)...)), c.mem)
		}
		return childRSS(seqBinary(c), "predict", "--model", dir, "--text-column", "text", "--input", in,
			"--output", filepath.Join(c.dir, name+"-out.parquet"), "--overwrite", "--quiet", "--sessions", "1")
	}
	return rss("long-row", words) / rss("short-row", words[:16<<10])
}

// textFolder makes a model folder of the encoder's ONNX file (model)
// with the WordPiece tokenizer its vocabulary was made for, beside it.
func textFolder(model string, hidden int) string {
	dir := filepath.Join(filepath.Dir(model), "folder")
	layOut(dir, model, "model.onnx", map[string]any{"config.json": encoderConfig(hidden)})
	return dir
}

// encoderConfig is config.json of an encoder make-seq-encoder.py exports.
func encoderConfig(hidden int) map[string]any {
	return map[string]any{"model_type": "bert", "hidden_size": hidden, "vocab_size": 30005, "pad_token_id": 0, "max_position_embeddings": 512}
}

// layOut writes a model folder: the model linked at modelPath, the
// WordPiece tokenizer its vocabulary was made for, and files as JSON.
func layOut(dir, model, modelPath string, files map[string]any) {
	for name, v := range files {
		data, err := json.Marshal(v)
		check(err)
		check(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		check(os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	tok, err := os.ReadFile("tokenizer/testdata/bert-uncased.json")
	check(err)
	check(os.WriteFile(filepath.Join(dir, "tokenizer.json"), tok, 0o644))
	link := filepath.Join(dir, modelPath)
	check(os.MkdirAll(filepath.Dir(link), 0o755))
	if _, err := os.Lstat(link); err != nil {
		abs, err := filepath.Abs(model)
		check(err)
		check(os.Symlink(abs, link))
	}
}

// textJobCPU returns the system CPU ÷ the user CPU of a text job of the
// encoder (predict --model DIR --text-column, the default sessions) over
// 8,000 texts of the committed long-tail lengths (up to 512 tokens): the
// kernel's share, page faults above all, which ONNX Runtime's arena kept
// warm holds down. (Over short texts alone the start, a warm-up run of
// the largest shape, is most of the job.)
func textJobCPU(c *config, model string, hidden int) float64 {
	dir := textFolder(model, hidden)
	in := filepath.Join(c.dir, "long-tail-texts.parquet")
	if _, err := os.Stat(in); err != nil {
		writeParquet(in, textDataset(c, longTailTexts(8000)), c.mem)
	}
	cmd := exec.Command(seqBinary(c), "predict", "--model", dir, "--text-column", "text", "--input", in,
		"--output", filepath.Join(c.dir, "golden-out.parquet"), "--overwrite", "--quiet")
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Fatalf("text job: %v\n%s", err, out)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return float64(ru.Stime.Nano()) / float64(ru.Utime.Nano())
}

// longTailTexts returns count texts of the committed long-tail lengths (up
// to 512 tokens), each word one WordPiece token.
func longTailTexts(count int) []string {
	words := strings.Fields("the licence grants you rights described below in full and of to")
	var texts []string
	for i, n := range readLengths()[:count] {
		var b strings.Builder
		for j := range max(n-2, 1) {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[(i+j)%len(words)])
		}
		texts = append(texts, b.String())
	}
	return texts
}

// textDataset makes a string column of texts, held for the rest of the
// run.
func textDataset(c *config, texts []string) *dataset.Dataset {
	schema := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(c.mem, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(texts, nil)
	return dataset.FromRecords(schema, b.NewRecordBatch())
}
