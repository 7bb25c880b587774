package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/drainpipe/drainpipe/internal/testbin"
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
	dir, err := testbin.NPM("tokenizers-0.23.2", rustTokenizers)
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
	for _, family := range []struct{ name, file string }{{"WordPiece", "bert-uncased"}, {"byte-level BPE", "bpe-roberta"}, {"Unigram (NFKC)", "unigram-nfkc"}} {
		file := filepath.Join("tokenizer", "testdata", family.file+".json")
		tok, err := tokenizer.LoadFile(file)
		check(err)
		ours := func() float64 {
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
		gs = append(gs, goal{fmt.Sprintf("tokenizers: drainpipe ÷ the Rust tokenizers (node, batches, one thread), %s, %d strings ×%d", family.name, len(texts), reps), atLeast(0.5),
			func(r int) float64 {
				a, b := pair(r, ours, rust)
				return b / a
			}})
	}
	return gs
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
