package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A tokenizer.json whose model has no "type" (the Rust tokenizers wrote
// none before they did, and still read such files) loads as the crate
// loads it, and encodes as the crate does: the first of BPE, WordPiece,
// WordLevel and Unigram its fields make. Each file's type is taken out
// of a file of that type.
func TestModelWithoutType(t *testing.T) {
	wordLevel := filepath.Join(t.TempDir(), "wordlevel.json")
	writeJSON(t, wordLevel, map[string]any{"version": "1.0", "pre_tokenizer": map[string]any{"type": "Whitespace"},
		"model": map[string]any{"type": "WordLevel", "vocab": map[string]int{"[UNK]": 0, "the": 1, "cat": 2, "sat": 3, ".": 4}, "unk_token": "[UNK]"}})
	items := corpusItems(t)[:300]
	items = append(items, textItem{Text: "the cat sat."}, textItem{Text: "The dog sat"})
	for name, file := range map[string]string{"WordPiece": "testdata/bert-uncased.json", "BPE": "testdata/bpe-roberta.json",
		"Unigram": "testdata/unigram-xlmr.json", "WordLevel": wordLevel} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(data, &raw); err != nil {
				t.Fatal(err)
			}
			model := map[string]any{}
			if err := json.Unmarshal(raw["model"], &model); err != nil {
				t.Fatal(err)
			}
			if model["type"] != name {
				t.Fatalf("%s is a %v model", file, model["type"])
			}
			delete(model, "type")
			untyped := map[string]any{}
			for k, v := range raw {
				untyped[k] = v
			}
			untyped["model"] = model
			out := filepath.Join(t.TempDir(), "untyped.json")
			writeJSON(t, out, untyped)
			tok, err := LoadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := modelType(&typed{raw: mustJSON(t, model)}); got != name {
				t.Fatalf("read as %s", got)
			}
			compare(t, tok, items, reference(t, out, nil, false, items))
		})
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := os.WriteFile(path, mustJSON(t, v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
