//go:build onnx

package main

import (
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/tokenizer"
)

// serve --chunk-pool mean: a text longer than a sentence-transformers
// folder keeps answers one embedding on /v1/embeddings and on /embed:
// the mean of its windows' embeddings (the windows tokenizer.Windows
// cuts, each answered as its ids alone are), weighted by their tokens,
// at unit length as the folder normalizes; the usage counts every
// window's tokens; past --max-chunks the text is refused, naming it; an
// overlap the windows leave no room for fails the start.
func TestServeChunkPool(t *testing.T) {
	needONNX(t)
	dir := filepath.Join(folders, "roberta-st")
	s := startServe(t, "--model", "emb="+dir, "--chunk-pool", "mean", "--chunk-overlap", "16", "--max-chunks", "8")
	var doc struct{ Texts []string }
	readJSON(t, filepath.Join(dir, "texts.json"), &doc)
	var info struct {
		MaxInputLength int `json:"max_input_length"`
	}
	resp, err := http.Get(s.http + "/info")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.MaxInputLength == 0 {
		t.Fatalf("/info: %v, max_input_length %d", err, info.MaxInputLength)
	}
	tok, err := tokenizer.LoadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Texts run together until they make 4 windows.
	var long string
	var ids [][]int64
	for i := 0; len(ids) < 4; i++ {
		long = strings.TrimSpace(long + " " + doc.Texts[i%len(doc.Texts)])
		ids = ids[:0]
		for e, err := range tok.Windows(long, info.MaxInputLength, 16, 0) {
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.IDs)
		}
	}
	if len(ids) < 3 || len(ids) > 8 {
		t.Fatalf("the long text makes %d windows of %d tokens; the test wants 3 to 8", len(ids), info.MaxInputLength)
	}
	type answer struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	var pooled, windows answer
	if st := teiPost(t, s.http+"/v1/embeddings", map[string]any{"model": "emb", "input": long, "encoding_format": "float"}, &pooled); st != 200 || len(pooled.Data) != 1 {
		t.Fatalf("a long text: %d", st)
	}
	if st := teiPost(t, s.http+"/v1/embeddings", map[string]any{"model": "emb", "input": ids, "encoding_format": "float"}, &windows); st != 200 {
		t.Fatalf("its windows as ids: %d", st)
	}
	want := make([]float64, len(windows.Data[0].Embedding))
	tokens := 0
	for i, d := range windows.Data {
		for j, x := range d.Embedding {
			want[j] += float64(len(ids[i])) * float64(x)
		}
		tokens += len(ids[i])
	}
	norm := 0.0
	for _, x := range want {
		norm += x * x
	}
	same := func(what string, got []float32) {
		t.Helper()
		for j, x := range want {
			if math.Abs(float64(got[j])-x/math.Sqrt(norm)) > 1e-5 {
				t.Fatalf("%s: %v, the windows' weighted mean at unit length %v", what, got[:4], want[:4])
			}
		}
	}
	same("/v1/embeddings", pooled.Data[0].Embedding)
	if pooled.Usage.PromptTokens != tokens {
		t.Errorf("usage %d tokens, the %d windows hold %d", pooled.Usage.PromptTokens, len(ids), tokens)
	}
	var tei [][]float32
	if st := teiPost(t, s.http+"/embed", map[string]any{"inputs": long}, &tei); st != 200 {
		t.Fatalf("/embed of a long text: %d", st)
	}
	same("/embed", tei[0])
	if _, stderr, err := drainpipe("serve", "--http", "127.0.0.1:0", "--grpc", "", "--model", "emb="+dir, "--chunk-pool", "mean", "--chunk-overlap", "1000"); err == nil || !strings.Contains(stderr, "--chunk-overlap 1000") {
		t.Errorf("an overlap the windows leave no room for: %v %s", err, stderr)
	}
	var refused struct{ Error string }
	if st := teiPost(t, s.http+"/embed", map[string]any{"inputs": strings.Repeat(long+" ", 3)}, &refused); st != 422 || !strings.Contains(refused.Error, "--max-chunks") {
		t.Errorf("a text of more windows than --max-chunks: %d %q", st, refused.Error)
	}
}
