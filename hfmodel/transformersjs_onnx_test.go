//go:build onnx

package hfmodel_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// transformersJS is the npm package of transformers.js.
const transformersJS = "@huggingface/transformers@4.3.2"

// The folders run by transformers.js, a second reference on the same
// ONNX files, batches of 16 padded together in input order, as
// drainpipe runs them (TestFoldersMatchPyTorch's plan): mean pooling,
// a decoder's last token after left padding with Normalize, and a
// multi-label classifier's sigmoids, each row the truncation leaves
// whole within 1e-5. A row past the model's length is not compared:
// transformers.js cuts it after adding the special tokens, so it loses
// its closing token ([SEP], <|endoftext|>), where sentence-transformers
// and drainpipe keep it (TestFoldersMatchPyTorch holds those rows to
// PyTorch). The folders with Dense modules or position inputs, and
// one-logit cross-encoders, are outside what transformers.js runs: it
// applies no Dense module and softmaxes a single logit to 1.
func TestFoldersMatchTransformersJS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	if _, err := exec.LookPath("node"); err != nil {
		testbin.Missing(t, "node: %v", err)
	}
	modules, err := testbin.NPM(t.Context(), "huggingface-transformers-4.3.2", transformersJS)
	if err != nil {
		testbin.Missing(t, "transformers.js: %v", err)
	}
	for _, c := range []struct {
		name, task, pooling, pad string
		normalize                bool
	}{
		{"roberta-ids", "feature-extraction", "mean", "<pad>", false},
		{"qwen3-style", "feature-extraction", "last_token", "<|endoftext|>", true},
		{"multilabel", "text-classification", "", "[PAD]", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := readReference(t, filepath.Join("testdata", c.name))
			ours, f := runFolder(t, c.name, ref)
			root := transformersLayout(t, folderDir(t, c.name), c.name, c.pad, f.MaxLength)
			req, err := json.Marshal(map[string]any{"root": root, "model": c.name, "task": c.task, "pooling": c.pooling,
				"normalize": c.normalize, "texts": ref.texts, "batch": 16})
			if err != nil {
				t.Fatal(err)
			}
			reqFile := filepath.Join(t.TempDir(), "request.json")
			if err := os.WriteFile(reqFile, req, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("node", "../scripts/transformersjs-reference.mjs", filepath.Join(modules, "node_modules"), reqFile)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("transformers.js: %v\n%s", err, stderrOf(err))
			}
			var theirs [][]float32
			if err := json.Unmarshal(out, &theirs); err != nil {
				t.Fatal(err)
			}
			if len(theirs) != len(ours) {
				t.Fatalf("transformers.js gave %d rows, drainpipe %d", len(theirs), len(ours))
			}
			whole := 0
			for row := range ours {
				if len(ref.ids[row]) == f.MaxLength {
					continue // maybe truncated: see above
				}
				whole++
				if d := maxDiff(ours[row], theirs[row]); d > 1e-5 {
					t.Fatalf("row %d (%d tokens): drainpipe's %s differs from transformers.js's by %g:\n got %v\nwant %v", row, len(ref.ids[row]), ref.column, d, ours[row], theirs[row])
				}
			}
			if whole < len(ours)/2 {
				t.Fatalf("%d of %d rows compared", whole, len(ours))
			}
		})
	}
}

// transformersLayout lays a folder out as transformers.js reads it, in a
// new root: its files, the model under onnx/, and in
// tokenizer_config.json the pad token (transformers.js pads a batch with
// it; the folders give only its id) and the folder's length as
// model_max_length (transformers.js reads no sentence_bert_config.json).
func transformersLayout(t *testing.T, dir, name, pad string, length int) string {
	t.Helper()
	root := t.TempDir()
	to := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Join(to, "onnx"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "tokenizer.json"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	abs, err := filepath.Abs(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(to, "onnx", "model.onnx")); err != nil {
		t.Fatal(err)
	}
	tc := map[string]any{}
	if data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		if err := json.Unmarshal(data, &tc); err != nil {
			t.Fatal(err)
		}
	}
	tc["pad_token"], tc["model_max_length"] = pad, length
	data, err := json.Marshal(tc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, "tokenizer_config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func stderrOf(err error) string {
	if e, ok := err.(*exec.ExitError); ok {
		return string(e.Stderr)
	}
	return ""
}
