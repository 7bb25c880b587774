//go:build onnx

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// inspect shows a model folder's whole stack: its tokenizer and pad id,
// the length it keeps, the pooling and the modules after it, and a
// classifier's head with its labels; --json holds the same.
func TestInspectFolderStack(t *testing.T) {
	needONNX(t)
	testdata := filepath.Join("..", "..", "hfmodel", "testdata")
	for folder, says := range map[string][]string{
		"roberta-st": {"model type: roberta", "tokenizer: BPE, 30088 tokens", "pad id: 30001", "max length: 65 tokens",
			"pooling: cls, max, mean, mean_sqrt_len_tokens, weightedmean, last", "then: Dense 192→16 (torch.nn.modules.activation.Tanh), Normalize"},
		"multilabel": {"tokenizer: WordPiece, 30005 tokens", "max length: 32 tokens", "head: sigmoid over 4 labels: sports, arts, science, travel"},
	} {
		stdout, stderr, err := drainpipe("inspect", filepath.Join(testdata, folder))
		if err != nil {
			t.Fatalf("%s: %v\n%s", folder, err, stderr)
		}
		for _, s := range says {
			if !strings.Contains(stdout, s) {
				t.Errorf("%s: inspect does not say %q:\n%s", folder, s, stdout)
			}
		}
	}
	stdout, stderr, err := drainpipe("inspect", "--json", filepath.Join(testdata, "multilabel"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var doc struct {
		Stack *stackInfo `json:"stack"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || doc.Stack == nil || doc.Stack.Head != "sigmoid" || len(doc.Stack.Labels) != 4 || doc.Stack.PadID != 30000 {
		t.Fatalf("--json stack %+v, %v", doc.Stack, err)
	}
}
