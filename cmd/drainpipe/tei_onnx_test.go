//go:build onnx

package main

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// teiPost posts a JSON body to the server and decodes the answer into
// out; it returns the status.
func teiPost(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
	}
	return resp.StatusCode
}

func near(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-5 }

// TEI's endpoints in TEI's documented shapes, on model folders, against
// PyTorch's outputs for the same texts: /rerank and /predict score a
// cross-encoder's pairs, /predict a multi-label classifier's labels,
// /embed a sentence-transformers folder (normalize and truncate as TEI
// means them), /tokenize its tokens, /info each
// model's kind; and TEI's statuses: 413 past the batch bound, 422 for a
// text over the length without truncate, for a pair model given single
// texts and for several text models at the root, 404 for a made-up name.
func TestTEIEndpoints(t *testing.T) {
	needONNX(t)
	srv := startServe(t, "--model", "ce="+filepath.Join(folders, "cross-encoder"),
		"--model", "ml="+filepath.Join(folders, "multilabel"), "--model", "emb="+filepath.Join(folders, "roberta-st"))
	var ce struct{ Texts, Pairs []string }
	readJSON(t, filepath.Join(folders, "cross-encoder", "texts.json"), &ce)
	ceTorch := torchOutputs(t, "cross-encoder", "sigmoid")

	// /rerank: one query and its passage at a time; then one query and
	// every passage, ranked.
	for i := range 12 {
		var ranks []struct {
			Index int
			Score float32
			Text  *string
		}
		if st := teiPost(t, srv.http+"/tei/ce/rerank", map[string]any{"query": ce.Texts[i], "texts": []string{ce.Pairs[i]}, "truncate": true, "return_text": true}, &ranks); st != 200 {
			t.Fatalf("rerank: status %d", st)
		}
		if len(ranks) != 1 || !near(ranks[0].Score, ceTorch[i][0]) || ranks[0].Text == nil || *ranks[0].Text != ce.Pairs[i] {
			t.Fatalf("rerank pair %d: %+v, PyTorch %v", i, ranks, ceTorch[i])
		}
	}
	var ranks []struct {
		Index int
		Score float32
	}
	teiPost(t, srv.http+"/tei/ce/rerank", map[string]any{"query": ce.Texts[0], "texts": ce.Pairs, "truncate": true, "raw_scores": true}, &ranks)
	seen := map[int]bool{}
	for k, r := range ranks {
		seen[r.Index] = true
		if k > 0 && r.Score > ranks[k-1].Score {
			t.Fatalf("rerank: not in descending order at %d", k)
		}
		if r.Index == 0 && !near(float32(1/(1+math.Exp(-float64(r.Score)))), ceTorch[0][0]) {
			t.Fatalf("rerank raw score of pair 0: %v, PyTorch's sigmoid %v", r.Score, ceTorch[0][0])
		}
	}
	if len(seen) != len(ce.Pairs) {
		t.Fatalf("rerank: %d passages ranked of %d", len(seen), len(ce.Pairs))
	}

	// /predict: a batch of pairs; a single pair.
	pairs := make([][]string, len(ce.Texts))
	for i := range pairs {
		pairs[i] = []string{ce.Texts[i], ce.Pairs[i]}
	}
	type scored struct {
		Score float32
		Label string
	}
	var batch [][]scored
	if st := teiPost(t, srv.http+"/tei/ce/predict", map[string]any{"inputs": pairs, "truncate": true}, &batch); st != 200 || len(batch) != len(pairs) {
		t.Fatalf("predict pairs: status %d, %d answers", st, len(batch))
	}
	for i, b := range batch {
		if len(b) != 1 || !near(b[0].Score, ceTorch[i][0]) {
			t.Fatalf("predict pair %d: %+v, PyTorch %v", i, b, ceTorch[i])
		}
	}
	var one []scored
	teiPost(t, srv.http+"/tei/ce/predict", map[string]any{"inputs": pairs[3], "truncate": true}, &one)
	if len(one) != 1 || !near(one[0].Score, ceTorch[3][0]) {
		t.Fatalf("predict one pair: %+v", one)
	}

	// A multi-label classifier: each label's sigmoid, highest first.
	var ml struct{ Texts []string }
	readJSON(t, filepath.Join(folders, "multilabel", "texts.json"), &ml)
	mlTorch := torchOutputs(t, "multilabel", "sigmoid")
	var info struct {
		ModelType struct {
			Classifier *struct {
				ID2Label map[string]string `json:"id2label"`
			} `json:"classifier"`
			Reranker  *struct{}                 `json:"reranker"`
			Embedding *struct{ Pooling string } `json:"embedding"`
		} `json:"model_type"`
		MaxInputLength int `json:"max_input_length"`
	}
	if resp, err := http.Get(srv.http + "/tei/ml/info"); err != nil || json.NewDecoder(resp.Body).Decode(&info) != nil || info.ModelType.Classifier == nil {
		t.Fatalf("info of the classifier: %v %+v", err, info)
	}
	labels := info.ModelType.Classifier.ID2Label
	teiPost(t, srv.http+"/tei/ml/predict", map[string]any{"inputs": ml.Texts, "truncate": true}, &batch)
	for i, b := range batch {
		for k, s := range b {
			if k > 0 && s.Score > b[k-1].Score {
				t.Fatalf("predict %d: not in descending order", i)
			}
			id := -1
			for key, l := range labels {
				if l == s.Label {
					id = int(key[0] - '0')
				}
			}
			if id < 0 || !near(s.Score, mlTorch[i][id]) {
				t.Fatalf("predict %d: %s %v, PyTorch %v", i, s.Label, s.Score, mlTorch[i])
			}
		}
	}

	// /embed: a text over the length is 422 without truncate; with it,
	// every embedding is PyTorch's, normalized as TEI's default does.
	var emb struct{ Texts []string }
	readJSON(t, filepath.Join(folders, "roberta-st", "texts.json"), &emb)
	embTorch := torchOutputs(t, "roberta-st", "embedding")
	var terr struct {
		Error     string `json:"error"`
		ErrorType string `json:"error_type"`
	}
	if st := teiPost(t, srv.http+"/tei/emb/embed", map[string]any{"inputs": emb.Texts}, &terr); st != 422 || terr.ErrorType != "Validation" || !strings.Contains(terr.Error, "must have less than") {
		t.Fatalf("embed past the length without truncate: %d %+v", st, terr)
	}
	var vecs [][]float32
	if st := teiPost(t, srv.http+"/tei/emb/embed", map[string]any{"inputs": emb.Texts, "truncate": true}, &vecs); st != 200 || len(vecs) != len(embTorch) {
		t.Fatalf("embed: status %d, %d vectors", st, len(vecs))
	}
	for i, v := range vecs {
		w := unit(embTorch[i])
		for j := range w {
			if !near(v[j], w[j]) {
				t.Fatalf("embed %d: %v, PyTorch (normalized) %v", i, v[:4], w[:4])
			}
		}
	}

	// /tokenize: the ids /embed ran, special tokens first and last, each
	// plain token's text the input's bytes between start and stop.
	var toks [][]struct {
		ID          int64
		Text        string
		Special     bool
		Start, Stop *int
	}
	teiPost(t, srv.http+"/tei/emb/tokenize", map[string]any{"inputs": []string{"Héllo wörld, tokens!"}}, &toks)
	if len(toks) != 1 || len(toks[0]) < 3 || !toks[0][0].Special || !toks[0][len(toks[0])-1].Special {
		t.Fatalf("tokenize: %+v", toks)
	}
	for _, tk := range toks[0][1 : len(toks[0])-1] {
		if tk.Special || tk.Start == nil || !strings.Contains("Héllo wörld, tokens!", tk.Text) || "Héllo wörld, tokens!"[*tk.Start:*tk.Stop] != tk.Text {
			t.Fatalf("tokenize: token %+v", tk)
		}
	}

	// Statuses: 413, 422, 404, in TEI's error shape.
	many := slices.Repeat([]string{"x"}, 2049)
	for _, c := range []struct {
		path   string
		body   any
		status int
	}{
		{"/tei/emb/embed", map[string]any{"inputs": many}, 413},
		{"/tei/ce/rerank", map[string]any{"query": "q", "texts": many}, 413},
		{"/tei/ce/predict", map[string]any{"inputs": "a single text"}, 422},
		{"/tei/emb/rerank", map[string]any{"query": "q", "texts": []string{"a"}}, 422},
		{"/embed", map[string]any{"inputs": "which model?"}, 422},
		{"/tei/nope/embed", map[string]any{"inputs": "x"}, 404},
		{"/tei/emb/embed", map[string]any{"inputs": "x", "truncation_direction": "Left"}, 422},
	} {
		terr.Error = ""
		if st := teiPost(t, srv.http+c.path, c.body, &terr); st != c.status || terr.Error == "" {
			t.Errorf("%s: status %d %+v, want %d in TEI's shape", c.path, st, terr, c.status)
		}
	}

	// A server of one text model answers TEI's root paths.
	solo := startServe(t, "--model", "emb="+filepath.Join(folders, "roberta-st"))
	var root [][]float32
	if st := teiPost(t, solo.http+"/embed", map[string]any{"inputs": emb.Texts[0], "truncate": true}, &root); st != 200 || len(root) != 1 || !near(root[0][0], vecs[0][0]) {
		t.Fatalf("/embed at the root: %d %v", st, root)
	}
	if resp, err := http.Get(solo.http + "/info"); err != nil || json.NewDecoder(resp.Body).Decode(&info) != nil || info.ModelType.Embedding == nil || info.MaxInputLength == 0 {
		t.Fatalf("/info: %v %+v", err, info)
	}
}

// unit returns v scaled to unit length.
func unit(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(sum))
	}
	return out
}

// readJSON decodes a JSON file into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, v) != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
