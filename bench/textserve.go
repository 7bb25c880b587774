package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/bench/internal/servebench"
	"github.com/drainpipe/drainpipe/internal/testing/seqtest"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/serve"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// textRequestTexts are the texts of one text request in the
// tokenize-once line: the test encoder's, real sentences of 5–60 words.
const textRequestTexts = 8

// tokenizeOnceGoals: the CPU a text request costs now that the server
// encodes each text once, against the same server encoding it twice, as
// it did before (OpenAI's usage, or TEI's length check, and then the
// model's ids: the rest of the two paths is the same). The model is
// seqtest's engine at hidden 384, whose device work is small, so what the
// encodings cost shows; the tokenizer is the test encoder's WordPiece.
func tokenizeOnceGoals(c *config) []goal {
	var once, twice servebench.Call
	d := min(max(time.Duration(c.rows)*time.Microsecond, 200*time.Millisecond), 2*time.Second)
	return []goal{
		{fmt.Sprintf("server: CPU a text request (/v1/embeddings, %d texts), each text encoded twice as before ÷ once", textRequestTexts), lineOnly, func(r int) float64 {
			if once == nil {
				once, twice = startTextServer(1), startTextServer(2)
			}
			a, b := pair(r, func() float64 { return cpuPerRequest(twice, d) }, func() float64 { return cpuPerRequest(once, d) })
			return a / b
		}},
	}
}

// startTextServer serves the test encoder's tokenizer over seqtest's
// engine, encoding each text encodings times, and returns a
// /v1/embeddings call of textRequestTexts texts.
func startTextServer(encodings int) servebench.Call {
	dir := filepath.Join("seq", "testdata", "encoder")
	tok, err := tokenizer.LoadFile(filepath.Join(dir, "tokenizer.json"))
	check(err)
	var doc struct{ Texts []string }
	data, err := os.ReadFile(filepath.Join(dir, "texts.json"))
	check(err)
	check(json.Unmarshal(data, &doc))
	encode := serve.TokenizerEncode(tok, tokenizer.DefaultMaxTextBytes)
	again := func(text, pair string, isPair bool) (serve.TextEncoding, error) {
		for range encodings - 1 {
			if _, err := encode(text, pair, isPair); err != nil {
				return serve.TextEncoding{}, err
			}
		}
		return encode(text, pair, isPair)
	}
	m, err := seq.New(&seqtest.Engine{Width: 384, Vocab: 30522}, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(128)}))
	check(err)
	schema := arrow.NewSchema([]arrow.Field{{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	url, _, _, err := servebench.Serve(serve.ModelSpec{Name: "enc", Model: m, Sequence: m, Input: schema,
		Text:     &serve.TextModel{Encode: again, MaxLength: 128},
		Options:  []predict.Option{predict.WithBatchSizes(1, 2, 4, 8, 16, 32, 64), predict.WithGroups(runtime.GOMAXPROCS(0))},
		Batching: online.Options{MaxDelay: 2 * time.Millisecond, QueueRows: 1 << 20}})
	check(err)
	body, err := json.Marshal(map[string]any{"model": "enc", "input": doc.Texts[:textRequestTexts]})
	check(err)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4 * onlineCallers, MaxIdleConnsPerHost: 4 * onlineCallers}}
	return postJSON(client, url[:strings.Index(url, "/v2/")]+"/v1/embeddings", body)
}

// cpuPerRequest runs a closed loop of c for d and returns the process's
// CPU time a request answered, in microseconds (the client's included:
// a ratio of two such loops against one server each cancels it).
func cpuPerRequest(c servebench.Call, d time.Duration) float64 {
	began, err := servebench.CPUTime()
	check(err)
	res := servebench.ClosedLoop(c, onlineCallers, d)
	ended, err := servebench.CPUTime()
	check(err)
	if res.Errors > 0 || res.Requests == 0 {
		check(fmt.Errorf("closed loop: %d of %d requests failed", res.Errors, res.Requests))
	}
	return float64(ended-began) / float64(time.Microsecond) / float64(res.Requests)
}
