//go:build onnx

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// The clients RAG code embeds through, the npm packages, against serve
// of a model folder (its tokenizer taking the text) with an API key:
// LangChain's OpenAIEmbeddings (baseURL at /v1; documents in batches of
// 7, newlines stripped as LangChain does by default, and a query) and
// Hugging Face's inference client (feature extraction at a TEI endpoint
// URL with the key as its access token, normalized as TEI's default)
// give the offline job's embeddings of
// the same texts, in order; LangChain raises the client's errors for a
// missing model (404) and a wrong key (401).
func TestEmbeddingClients(t *testing.T) {
	needONNX(t)
	if _, err := exec.LookPath("node"); err != nil {
		testbin.Missing(t, "node: %v", err)
	}
	modules, err := testbin.NPM(t.Context(), "langchain-openai-1.6.0-hf-inference-4.13.30", "@langchain/openai@1.6.0", "@huggingface/inference@4.13.30")
	if err != nil {
		testbin.Missing(t, "the clients: %v", err)
	}
	dir := t.TempDir()
	textsPath, _ := filepath.Abs(filepath.Join(encoderDir, "texts.json"))
	var doc struct{ Texts []string }
	readJSON(t, textsPath, &doc)
	const n = 20
	offline := offlineEmbeddings(t, n, "replace(texts[i], chr(10), ' ')")
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("a-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// One server, the key on every door: the inference client sends it
	// as its access token.
	srv := startServe(t, "--api-key-file", keys, "--model", "encoder="+encoderDir)
	got := runClient(t, "embedding-clients.mjs", modules, map[string]any{"openai_url": srv.http + "/v1", "tei_url": srv.http + "/tei/encoder",
		"key": "a-key", "model": "encoder", "texts": doc.Texts[:n]})
	var res struct {
		Documents, Features [][]float32
		Query               []float32
		Errors              map[string]struct {
			Status *int
			Class  string
		}
	}
	if err := json.Unmarshal(got, &res); err != nil {
		t.Fatalf("%v: %.500s", err, got)
	}
	same := func(what string, got, want [][]float32) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d embeddings, want %d", what, len(got), len(want))
		}
		for i := range want {
			for j, v := range want[i] {
				if len(got[i]) != len(want[i]) || math.Abs(float64(got[i][j]-v)) > 1e-5 {
					t.Fatalf("%s: text %d: %v, offline %v", what, i, got[i][:4], want[i][:4])
				}
			}
		}
	}
	same("LangChain's documents", res.Documents, offline)
	same("LangChain's query", [][]float32{res.Query}, offline[:1])
	normalized := make([][]float32, len(offline))
	for i, v := range offline {
		normalized[i] = unit(v)
	}
	same("Hugging Face's feature extraction", res.Features, normalized)
	for name, want := range map[string]int{"missing_model": 404, "wrong_key": 401} {
		if e := res.Errors[name]; e.Status == nil || *e.Status != want {
			t.Errorf("LangChain, %s: %+v, want status %d", name, e, want)
		}
	}
}

// runClient runs a client script of scripts/ with node, the npm
// packages in modules and the request, and returns what it printed.
func runClient(t *testing.T, script, modules string, request any) []byte {
	t.Helper()
	req, _ := json.Marshal(request)
	reqFile := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(reqFile, req, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("..", "..", "scripts", script), filepath.Join(modules, "node_modules"), reqFile)
	var clientErr bytes.Buffer
	cmd.Stderr = &clientErr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, clientErr.String())
	}
	return got
}

// offlineEmbeddings returns the job's embeddings of the encoder's first
// n golden texts, each made by the DuckDB expression text of texts[i],
// written to Parquet by DuckDB.
func offlineEmbeddings(t *testing.T, n int, text string) [][]float32 {
	t.Helper()
	dir := t.TempDir()
	textsPath, _ := filepath.Abs(filepath.Join(encoderDir, "texts.json"))
	in := filepath.Join(dir, "texts.parquet")
	duckdbtest.Query(t, fmt.Sprintf(`COPY (
		WITH r AS (SELECT texts FROM read_json(%s)),
		i AS (SELECT unnest(generate_series(1, %d)) AS i FROM r)
		SELECT i - 1 AS key, %s AS text FROM r, i ORDER BY i
	) TO %s (FORMAT parquet)`, duckdb.Quote(textsPath), n, text, duckdb.Quote(in)))
	out := filepath.Join(dir, "out.parquet")
	if _, stderr, err := drainpipe("predict", "--model", encoderDir, "--text-column", "text", "--input", in, "--output", out, "--keep", "key", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	return readAll(t, out).embedding
}
