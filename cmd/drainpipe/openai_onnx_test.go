//go:build onnx

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// openAIClient is OpenAI's own client, the npm package.
const openAIClient = "openai@7.60.0"

type clientEmbedding struct {
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

type clientError struct {
	Status int     `json:"status"`
	Code   *string `json:"code"`
	Type   *string `json:"type"`
}

// OpenAI's client pointed at serve's /v1: embeddings of texts (the
// client's default base64, and float), of one text, of token arrays of
// other lengths, equal the offline job's for the same texts and in the
// order sent; dimensions shortens to unit length; usage counts the
// tokenizer's tokens; /v1/models lists the model; and the client's
// errors for a missing model, an empty input, dimensions past the
// model's, a wrong API key and text to a token model carry OpenAI's
// statuses and codes.
func TestOpenAIClient(t *testing.T) {
	needONNX(t)
	if _, err := exec.LookPath("node"); err != nil {
		testbin.Missing(t, "node: %v", err)
	}
	modules, err := testbin.NPM(t.Context(), "openai-7.60.0", openAIClient)
	if err != nil {
		testbin.Missing(t, "the openai client: %v", err)
	}
	dir := t.TempDir()
	textsPath, _ := filepath.Abs(filepath.Join(encoderDir, "texts.json"))
	var doc struct {
		Texts []string  `json:"texts"`
		IDs   [][]int64 `json:"input_ids"`
	}
	data, err := os.ReadFile(textsPath)
	if err != nil || json.Unmarshal(data, &doc) != nil {
		t.Fatalf("texts.json: %v", err)
	}
	const n = 24
	offline := offlineEmbeddings(t, n, "texts[i]")
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("first-key\n\nsecret-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := startServe(t, "--api-key-file", keys, "--model", "encoder="+encoderDir)
	ids := startServe(t, "--model", "encoder="+withoutTokenizer(t, encoderDir))
	got := runClient(t, "openai-client.mjs", modules, map[string]any{"text_url": text.http + "/v1", "ids_url": ids.http + "/v1", "key": "secret-key", "model": "encoder",
		"texts": doc.Texts[:n], "ids": doc.IDs[:n]})
	var res struct {
		Default, Float, One, Short, Tokens []clientEmbedding
		Usage                              struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
		Models []string
		Errors map[string]clientError
	}
	if err := json.Unmarshal(got, &res); err != nil {
		t.Fatalf("%v: %.500s", err, got)
	}
	same := func(what string, es []clientEmbedding, want [][]float32) {
		t.Helper()
		if len(es) != len(want) {
			t.Fatalf("%s: %d embeddings, want %d", what, len(es), len(want))
		}
		for i, e := range es {
			if e.Index != i || len(e.Embedding) != len(want[i]) {
				t.Fatalf("%s: embedding %d has index %d and %d values, want %d", what, i, e.Index, len(e.Embedding), len(want[i]))
			}
			for j, v := range want[i] {
				if math.Abs(float64(e.Embedding[j]-v)) > 1e-5 {
					t.Fatalf("%s: text %d: %v, offline %v", what, i, e.Embedding[:4], want[i][:4])
				}
			}
		}
	}
	same("base64 (the client's default)", res.Default, offline)
	same("float", res.Float, offline)
	same("one text", res.One, offline[:1])
	same("token arrays", res.Tokens, offline)
	tokens := 0
	for _, r := range doc.IDs[:n] {
		tokens += len(r)
	}
	if res.Usage.PromptTokens != tokens || res.Usage.TotalTokens != tokens {
		t.Errorf("usage %+v, want %d tokens", res.Usage, tokens)
	}
	for i, e := range res.Short {
		norm := 0.0
		for _, v := range offline[i][:8] {
			norm += float64(v) * float64(v)
		}
		for j, v := range offline[i][:8] {
			if len(e.Embedding) != 8 || math.Abs(float64(e.Embedding[j])-float64(v)/math.Sqrt(norm)) > 1e-5 {
				t.Fatalf("dimensions 8: text %d: %v, want the first 8 of %v at unit length", i, e.Embedding, offline[i][:8])
			}
		}
	}
	if strings.Join(res.Models, ",") != "encoder" {
		t.Errorf("models %v", res.Models)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for name, want := range map[string]struct {
		status     int
		code, kind string
	}{
		"missing_model":       {404, "model_not_found", "invalid_request_error"},
		"empty_input":         {400, "", "invalid_request_error"},
		"too_many_dimensions": {400, "", "invalid_request_error"},
		"wrong_key":           {401, "invalid_api_key", "invalid_request_error"},
		"text_to_ids_model":   {400, "", "invalid_request_error"},
	} {
		e := res.Errors[name]
		if e.Status != want.status || str(e.Code) != want.code || str(e.Type) != want.kind {
			t.Errorf("%s: status %d, code %q, type %q; want %d, %q, %q", name, e.Status, str(e.Code), str(e.Type), want.status, want.code, want.kind)
		}
	}

	// A token array of a million ids beside 2,047 short ones holds what
	// the model runs (its longest, 512), not a million slots a row (32 GB
	// padded): it answers as its first 512 ids do.
	long := make([]int64, 1_000_000)
	for i := range long {
		long[i] = 500
	}
	embedIDs := func(rows ...[]int64) []clientEmbedding {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"model": "encoder", "input": rows})
		resp, err := http.Post(ids.http+"/v1/embeddings", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res struct{ Data []clientEmbedding }
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &res) != nil || len(res.Data) != len(rows) {
			t.Fatalf("token arrays: %d %.300s", resp.StatusCode, raw)
		}
		return res.Data
	}
	cut := embedIDs(long[:512])[0].Embedding
	rows := [][]int64{long}
	for len(rows) < 2048 {
		rows = append(rows, []int64{101, 102})
	}
	same("a million ids", embedIDs(rows...)[:1], [][]float32{cut})
	if rss := statusKB(t, ids.cmd.Process.Pid, "VmHWM") << 10; rss > 1<<30 {
		t.Errorf("a million ids beside 2,047 short arrays: peak RSS %d MiB, want under 1 GiB", rss>>20)
	}

	// Hostile: 100,000 inputs, and bodies that are not requests, answer
	// 400 in OpenAI's shape; the server goes on.
	many := make([]string, 100000)
	for i := range many {
		many[i] = "x"
	}
	for name, body := range map[string]any{
		"100,000 inputs": map[string]any{"model": "encoder", "input": many},
		"mixed input":    map[string]any{"model": "encoder", "input": []any{"a", 1}},
		"no model":       map[string]any{"input": "a"},
		"format":         map[string]any{"model": "encoder", "input": "a", "encoding_format": "int8"},
		"an empty array": map[string]any{"model": "encoder", "input": []int{}},
	} {
		b, _ := json.Marshal(body)
		hreq, _ := http.NewRequest(http.MethodPost, text.http+"/v1/embeddings", bytes.NewReader(b))
		hreq.Header.Set("Authorization", "Bearer first-key")
		resp, err := http.DefaultClient.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var shape struct {
			Error struct{ Message, Type string } `json:"error"`
		}
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(raw, &shape) != nil || shape.Error.Type != "invalid_request_error" || shape.Error.Message == "" {
			t.Errorf("%s: %d %.200s", name, resp.StatusCode, raw)
		}
	}
}

// withoutTokenizer copies a model folder but its tokenizer files: a
// model that takes token ids alone.
func withoutTokenizer(t *testing.T, folder string) string {
	t.Helper()
	dir := t.TempDir()
	err := os.CopyFS(dir, os.DirFS(folder))
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if err == nil {
			err = os.Remove(filepath.Join(dir, name))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
