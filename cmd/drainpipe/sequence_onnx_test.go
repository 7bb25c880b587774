//go:build onnx

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device/onnx"
	"github.com/drainpipe/drainpipe/internal/testing/duckdb"
	"github.com/drainpipe/drainpipe/internal/testing/duckdbtest"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// encoderDir is the Hugging Face-style folder of the encoder PyTorch
// exported (scripts/make-seq-encoder.py), with PyTorch's outputs.
var encoderDir = filepath.Join("..", "..", "seq", "testdata", "encoder")

// tokenParquet has DuckDB write the encoder's test rows, copies times
// over, as a Parquet file of key, input_ids INTEGER[] and token_type_ids
// INTEGER[], with the given rows made null.
func tokenParquet(t *testing.T, dir string, copies int, nulls ...int) string {
	t.Helper()
	rows, _ := filepath.Abs(filepath.Join(encoderDir, "rows.json"))
	out := filepath.Join(dir, "tokens.parquet")
	null := "false"
	for _, n := range nulls {
		null += " OR k = " + strconv.Itoa(n)
	}
	duckdbtest.Query(t, `COPY (
		WITH r AS (SELECT input_ids, token_type_ids FROM read_json(`+duckdb.Quote(rows)+`)),
		i AS (SELECT unnest(generate_series(1, len(input_ids))) AS i FROM r),
		c AS (SELECT unnest(generate_series(0, `+strconv.Itoa(copies-1)+`)) AS c),
		t AS (SELECT c * len(r.input_ids) + i - 1 AS k, i, r.input_ids[i]::INTEGER[] AS ids, r.token_type_ids[i]::INTEGER[] AS types FROM r, i, c)
		SELECT k AS key, CASE WHEN `+null+` THEN NULL ELSE ids END AS input_ids, types AS token_type_ids,
			`+torchClasses(t)+`[i]::INTEGER AS sentiment FROM t ORDER BY k
	) TO `+duckdb.Quote(out)+` (FORMAT parquet, ROW_GROUP_SIZE 2048)`)
	return out
}

// torchClasses returns, as a DuckDB list, the class PyTorch's logits
// give each test row.
func torchClasses(t *testing.T) string {
	t.Helper()
	var torch struct {
		Logits [][]float32 `json:"logits"`
	}
	data, err := os.ReadFile(filepath.Join(encoderDir, "torch.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &torch); err != nil {
		t.Fatal(err)
	}
	classes := make([]string, len(torch.Logits))
	for i, l := range torch.Logits {
		best := 0
		for j, v := range l {
			if v > l[best] {
				best = j
			}
		}
		classes[i] = strconv.Itoa(best)
	}
	return "[" + strings.Join(classes, ",") + "]"
}

func needONNX(t *testing.T) {
	t.Helper()
	if onnx.DefaultLibrary() == "" {
		testbin.Missing(t, "%s", "ONNX Runtime library not found: run scripts/fetch-onnxruntime.sh or set "+onnx.LibraryEnv)
	}
}

// A sentence-embedding model exported from PyTorch, run over a Parquet
// file of token ids that DuckDB wrote, with one predict command: one
// embedding a row, in order, within 1e-5 of PyTorch's, the label from
// id2label, the shapes printed first and the padding waste after.
func TestPredictSequenceModelFolder(t *testing.T) {
	needONNX(t)
	dir := t.TempDir()
	in := tokenParquet(t, dir, 1)
	out := filepath.Join(dir, "out.parquet")
	stats := filepath.Join(dir, "stats.json")
	stdout, stderr, err := drainpipe("predict", "--model", encoderDir, "--input", in, "--output", out, "--keep", "key",
		"--type-ids-column", "token_type_ids", "--window", "100", "--max-batch-tokens", "4096", "--stats-json", stats)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "sequence shapes:") || !strings.Contains(stderr, "512 tokens × 1, 2, 4, 8 rows") {
		t.Errorf("the shapes are not printed first:\n%s", stderr)
	}
	if !strings.Contains(stdout, "rows=303 ") || !strings.Contains(stdout, "padding_waste=") {
		t.Errorf("summary %q", stdout)
	}
	info, _, err := drainpipe("inspect", encoderDir)
	if err != nil || !strings.Contains(info, "kind: ONNX sequence model") || !strings.Contains(info, "graph inputs: input_ids, attention_mask, token_type_ids, each [batch, sequence]") ||
		!strings.Contains(info, "embedding: fixed_size_list<item: float32>[32]") || !strings.Contains(info, "label: utf8") {
		t.Errorf("inspect: %v\n%s", err, info)
	}
	var torch struct {
		Mean   [][]float32 `json:"last_hidden_state_mean"`
		Logits [][]float32 `json:"logits"`
	}
	data, err := os.ReadFile(filepath.Join(encoderDir, "torch.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &torch); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, out)
	if len(got.keys) != len(torch.Mean) {
		t.Fatalf("%d rows out, %d in", len(got.keys), len(torch.Mean))
	}
	labels := []string{"negative", "neutral", "positive"}
	for i, k := range got.keys {
		if k != int64(i) {
			t.Fatalf("row %d has key %d", i, k)
		}
		for j, v := range torch.Mean[i] {
			if d := math.Abs(float64(got.embedding[i][j] - v)); d > 1e-5 {
				t.Fatalf("row %d: embedding %d is %v, PyTorch's %v", i, j, got.embedding[i][j], v)
			}
		}
		best := 0
		for j, v := range torch.Logits[i] {
			if v > torch.Logits[i][best] {
				best = j
			}
		}
		if got.labels[i] != labels[best] {
			t.Fatalf("row %d: label %q, PyTorch's logits say %q", i, got.labels[i], labels[best])
		}
	}
	var doc struct {
		Sequence struct {
			Tokens       int64            `json:"tokens"`
			PaddingWaste float64          `json:"padding_waste"`
			Shapes       map[string]int64 `json:"shapes"`
		} `json:"sequence"`
	}
	data, _ = os.ReadFile(stats)
	if err := json.Unmarshal(data, &doc); err != nil || doc.Sequence.Tokens == 0 || len(doc.Sequence.Shapes) == 0 {
		t.Fatalf("stats: %v %s", err, data)
	}
}

type seqOutput struct {
	keys      []int64
	embedding [][]float32
	labels    []string
}

func readAll(t *testing.T, path string) seqOutput {
	t.Helper()
	set, err := fileset.Open([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := set.Dataset()
	if err != nil {
		t.Fatal(err)
	}
	var o seqOutput
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatal(err)
		}
		s := rec.Schema()
		o.keys = append(o.keys, rec.Column(s.FieldIndices("key")[0]).(*array.Int64).Int64Values()...)
		emb := rec.Column(s.FieldIndices("embedding")[0]).(array.ListLike)
		vals := emb.ListValues().(*array.Float32).Float32Values()
		for i := range emb.Len() {
			a, b := emb.ValueOffsets(i)
			o.embedding = append(o.embedding, append([]float32(nil), vals[a:b]...))
		}
		lab := rec.Column(s.FieldIndices("label")[0]).(*array.String)
		for i := range lab.Len() {
			o.labels = append(o.labels, lab.Value(i))
		}
		if _, ok := emb.DataType().(*arrow.FixedSizeListType); !ok {
			t.Fatalf("embedding is %s, want a fixed_size_list", emb.DataType())
		}
	}
	return o
}

// A sequence model's job killed with SIGKILL at random moments and
// resumed ends with the bytes of a job never interrupted (the plan of a
// window is a function of its rows), for a file and a folder output.
func TestKilledSequenceJobResumesExactlyOnce(t *testing.T) {
	needONNX(t)
	if testing.Short() {
		t.Skip("runs the CLI many times")
	}
	dir := t.TempDir()
	in := tokenParquet(t, dir, 40)
	predict := []string{"predict", "--model", encoderDir, "--input", in, "--keep", "key", "--type-ids-column", "token_type_ids",
		"--window", "256", "--part-rows", "1024", "--quiet"}
	for _, outs := range [][2]output{
		{fileOutput(dir, "ref.parquet"), fileOutput(dir, "out.parquet")},
		{folderOutput(dir, "ref"), folderOutput(dir, "out")},
	} {
		ref, out := outs[0], outs[1]
		ref.predict, out.predict = predict, predict
		t.Run(filepath.Base(out.path), func(t *testing.T) { killAndResume(t, dir, ref, out) })
	}
}

// Bad token input: null lists and out-of-vocabulary or negative ids are
// set aside one by one, naming the row and the reason; a float column
// given as tokens, and sequence flags for a model that is not one, are
// one clear error each.
func TestSequenceBadInput(t *testing.T) {
	needONNX(t)
	dir := t.TempDir()
	in := tokenParquet(t, dir, 1, 4, 100)
	aside := filepath.Join(dir, "aside.parquet")
	out := filepath.Join(dir, "out.parquet")
	stdout, stderr, err := drainpipe("predict", "--model", encoderDir, "--input", in, "--output", out, "--keep", "key",
		"--set-aside", aside, "--window", "64", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "rows=301 ") || !strings.Contains(stdout, "set_aside=2") {
		t.Fatalf("summary %q", stdout)
	}
	got := duckdbtest.Query(t, "SELECT key, reason FROM read_parquet("+duckdb.Quote(aside)+") ORDER BY key")
	if len(got) != 2 || fmt.Sprint(got[0][0]) != "4" || fmt.Sprint(got[1][0]) != "100" || !strings.Contains(got[0][1].(string), "null value") {
		t.Fatalf("set aside: %v", got)
	}

	// Ids past the vocabulary (config.json's vocab_size) and negative ids
	// are row errors.
	bad := filepath.Join(dir, "bad.parquet")
	duckdbtest.Query(t, "COPY (SELECT * FROM (VALUES (0, [101, 5, 102]), (1, [101, 5000000, 102]), (2, [101, -3, 102]), (3, []::INTEGER[]), (4, [7])) v(key, input_ids)) TO "+duckdb.Quote(bad)+" (FORMAT parquet)")
	stdout, stderr, err = drainpipe("predict", "--model", encoderDir, "--input", bad, "--output", filepath.Join(dir, "bad-out.parquet"), "--keep", "key",
		"--set-aside", filepath.Join(dir, "bad-aside.parquet"), "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "rows=3 ") || !strings.Contains(stdout, "set_aside=2") {
		t.Fatalf("summary %q\n%s", stdout, stderr)
	}
	got = duckdbtest.Query(t, "SELECT key, reason FROM read_parquet("+duckdb.Quote(filepath.Join(dir, "bad-aside.parquet"))+") ORDER BY key")
	if len(got) != 2 || fmt.Sprint(got[0][0]) != "1" || fmt.Sprint(got[1][0]) != "2" || !strings.Contains(got[0][1].(string), "token 1 is 5000000, the vocabulary has 1000") || !strings.Contains(got[1][1].(string), "out of range") {
		t.Fatalf("set aside: %v", got)
	}

	// Without --set-aside the first bad row ends the job, naming it.
	_, stderr, err = drainpipe("predict", "--model", encoderDir, "--input", bad, "--output", filepath.Join(dir, "x.parquet"), "--quiet")
	if err == nil || !strings.Contains(stderr, "row 1") {
		t.Fatalf("err %v, stderr %s", err, stderr)
	}

	// A float tensor column given as the tokens.
	_, stderr, err = drainpipe("predict", "--model", encoderDir, "--input", filepath.Join(fixture(t, 10, 4, 2), "in-*.parquet"),
		"--tokens-column", "features", "--output", filepath.Join(dir, "y.parquet"), "--quiet")
	if err == nil || !strings.Contains(stderr, `column "features"`) || !strings.Contains(stderr, "not a token column") {
		t.Fatalf("err %v, stderr %s", err, stderr)
	}
	// Sequence flags for a model that takes a tensor.
	mlp := fixture(t, 10, 4, 2)
	_, stderr, err = drainpipe(append(predictArgs(mlp, filepath.Join(dir, "z.parquet")), "--window", "64")...)
	if err == nil || !strings.Contains(stderr, "--window is for sequence models") {
		t.Fatalf("err %v, stderr %s", err, stderr)
	}
}

// The encoder served: one request a row (int64 token ids of shape
// [1, n]) answers what the offline run of the same rows wrote, a request
// of two equal rows answers both alike, the label comes as BYTES, and
// /metrics has the tokens, the padding and the shapes run.
func TestServeSequenceModel(t *testing.T) {
	needONNX(t)
	dir := t.TempDir()
	in := tokenParquet(t, dir, 1)
	out := filepath.Join(dir, "out.parquet")
	if _, stderr, err := drainpipe("predict", "--model", encoderDir, "--input", in, "--output", out, "--keep", "key", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	offline := readAll(t, out)
	rows := encoderRows(t)
	s := startServe(t, "--model", "encoder="+encoderDir)
	infer := func(ids ...[]int64) (embeddings [][]float32, labels []string) {
		t.Helper()
		var flat []int64
		for _, r := range ids {
			flat = append(flat, r...)
		}
		body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{
			"name": "input_ids", "datatype": "INT64", "shape": []int{len(ids), len(ids[0])}, "data": flat}}})
		resp, err := http.Post(s.http+"/v2/models/encoder/infer", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var res struct {
			Outputs []struct {
				Name  string          `json:"name"`
				Shape []int           `json:"shape"`
				Data  json.RawMessage `json:"data"`
			} `json:"outputs"`
		}
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(raw, &res) != nil {
			t.Fatalf("infer: %d %s", resp.StatusCode, raw)
		}
		for _, o := range res.Outputs {
			switch o.Name {
			case "embedding":
				var v []float32
				json.Unmarshal(o.Data, &v)
				for i := 0; i < len(v); i += o.Shape[1] {
					embeddings = append(embeddings, v[i:i+o.Shape[1]])
				}
			case "label":
				json.Unmarshal(o.Data, &labels)
			}
		}
		return embeddings, labels
	}
	for i := 0; i < len(rows); i += 10 {
		emb, labels := infer(rows[i])
		if len(emb) != 1 || len(labels) != 1 || labels[0] != offline.labels[i] {
			t.Fatalf("row %d: %d embeddings, labels %v; offline %q", i, len(emb), labels, offline.labels[i])
		}
		for j, v := range offline.embedding[i] {
			if d := math.Abs(float64(emb[0][j] - v)); d > 1e-5 {
				t.Fatalf("row %d: served embedding %d is %v, offline %v", i, j, emb[0][j], v)
			}
		}
	}
	two, _ := infer(rows[7], rows[7])
	if len(two) != 2 || fmt.Sprint(two[0]) != fmt.Sprint(two[1]) {
		t.Fatalf("two equal rows: %v", two)
	}
	resp, err := http.Get(s.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`drainpipe_sequence_tokens_total{model="encoder",version="1"}`, `drainpipe_sequence_token_slots_total{model="encoder"`, `drainpipe_sequence_sub_batches_total{model="encoder",shape="1×`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// eval scores the encoder as a classifier over its token rows, labelled
// with PyTorch's classes: accuracy 1.
func TestEvalSequenceModel(t *testing.T) {
	needONNX(t)
	dir := t.TempDir()
	in := tokenParquet(t, dir, 1)
	report := filepath.Join(dir, "eval.json")
	stdout, stderr, err := drainpipe("eval", "--model", encoderDir, "--input", in, "--label", "sentiment", "--type-ids-column", "token_type_ids",
		"--window", "128", "--json", report, "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var doc struct {
		Rows    int64               `json:"rows"`
		Metrics map[string]*float64 `json:"metrics"`
	}
	data, _ := os.ReadFile(report)
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Rows != 303 || doc.Metrics["accuracy"] == nil || *doc.Metrics["accuracy"] != 1 {
		t.Fatalf("eval: %s\n%s", data, stdout)
	}
	// The random encoder gives every row class 0: a ROC AUC over labels of
	// one class has no value, written as null.
	if v, ok := doc.Metrics["roc_auc_class_0"]; !ok || v != nil {
		t.Fatalf("roc_auc_class_0: %v in %s", v, data)
	}
	// A label column named as the classifier's label output (Hugging
	// Face's convention): the output is renamed, not a clash.
	relabelled := filepath.Join(dir, "relabelled.parquet")
	duckdbtest.Query(t, `COPY (SELECT * EXCLUDE (sentiment), sentiment AS label FROM read_parquet(`+duckdb.Quote(in)+`)) TO `+duckdb.Quote(relabelled)+` (FORMAT parquet)`)
	if _, stderr, err := drainpipe("eval", "--model", encoderDir, "--input", relabelled, "--label", "label", "--type-ids-column", "token_type_ids",
		"--window", "128", "--json", report, "--overwrite", "--quiet"); err != nil {
		t.Fatalf("--label label: %v\n%s", err, stderr)
	}
}

// --text-column: a text column DuckDB wrote, tokenized on the input side
// by the model folder's tokenizer.json, predicts what the same rows'
// token ids from the Rust tokenizers predict, bit for bit; a null text
// is set aside.
func TestPredictTextColumn(t *testing.T) {
	needONNX(t)
	dir := t.TempDir()
	texts, _ := filepath.Abs(filepath.Join(encoderDir, "texts.json"))
	in := filepath.Join(dir, "texts.parquet")
	duckdbtest.Query(t, `COPY (
		WITH r AS (SELECT texts, input_ids FROM read_json(`+duckdb.Quote(texts)+`)),
		i AS (SELECT unnest(generate_series(1, len(texts))) AS i FROM r)
		SELECT i - 1 AS key, CASE WHEN i = 8 THEN NULL ELSE texts[i] END AS body, input_ids[i]::INTEGER[] AS input_ids FROM r, i ORDER BY i
	) TO `+duckdb.Quote(in)+` (FORMAT parquet)`)
	fromText, fromIDs := filepath.Join(dir, "text.parquet"), filepath.Join(dir, "ids.parquet")
	stdout, stderr, err := drainpipe("predict", "--model", encoderDir, "--input", in, "--output", fromText, "--keep", "key",
		"--text-column", "body", "--set-aside", filepath.Join(dir, "aside.parquet"), "--window", "64", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "rows=399 ") || !strings.Contains(stdout, "set_aside=1") {
		t.Fatalf("summary %q", stdout)
	}
	if _, stderr, err := drainpipe("predict", "--model", encoderDir, "--input", in, "--output", fromIDs, "--keep", "key",
		"--tokens-column", "input_ids", "--window", "64", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	a, b := readAll(t, fromText), readAll(t, fromIDs)
	if len(a.keys) != 399 || len(b.keys) != 400 {
		t.Fatalf("%d and %d rows", len(a.keys), len(b.keys))
	}
	for i, k := range a.keys {
		j := int(k) // the ids run has every row, the null text's too
		if fmt.Sprint(a.embedding[i]) != fmt.Sprint(b.embedding[j]) || a.labels[i] != b.labels[j] {
			t.Fatalf("row %d: from text %v, from the Rust tokenizers' ids %v", k, a.embedding[i], b.embedding[j])
		}
	}
}

// A folder with a tokenizer takes text (BYTES), encoded in the server
// with its tokenizer.json, without a flag; a request of texts answers
// what predict gives the Rust tokenizers' ids of the same texts.
func TestServeText(t *testing.T) {
	needONNX(t)
	dir := t.TempDir()
	textsPath, _ := filepath.Abs(filepath.Join(encoderDir, "texts.json"))
	in := filepath.Join(dir, "ids.parquet")
	duckdbtest.Query(t, `COPY (
		WITH r AS (SELECT input_ids FROM read_json(`+duckdb.Quote(textsPath)+`)),
		i AS (SELECT unnest(generate_series(1, 40)) AS i FROM r)
		SELECT i - 1 AS key, input_ids[i]::INTEGER[] AS input_ids FROM r, i ORDER BY i
	) TO `+duckdb.Quote(in)+` (FORMAT parquet)`)
	out := filepath.Join(dir, "out.parquet")
	if _, stderr, err := drainpipe("predict", "--model", encoderDir, "--input", in, "--output", out, "--keep", "key", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	offline := readAll(t, out)
	var doc struct {
		Texts []string `json:"texts"`
	}
	data, _ := os.ReadFile(textsPath)
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--model", "encoder="+encoderDir)
	body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "text", "datatype": "BYTES", "shape": []int{40}, "data": doc.Texts[:40]}}})
	resp, err := http.Post(s.http+"/v2/models/encoder/infer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var res struct {
		Outputs []struct {
			Name string    `json:"name"`
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	if resp.StatusCode != 200 {
		t.Fatalf("infer: %d %s", resp.StatusCode, raw)
	}
	json.Unmarshal(raw, &res)
	for _, o := range res.Outputs {
		if o.Name != "embedding" {
			continue
		}
		for i := range 40 {
			for j, v := range offline.embedding[i] {
				if d := math.Abs(float64(o.Data[i*32+j] - v)); d > 1e-5 {
					t.Fatalf("text %d: served %v, offline %v", i, o.Data[i*32:i*32+32], offline.embedding[i])
				}
			}
		}
		return
	}
	t.Fatalf("no embedding output: %s", raw)
}
