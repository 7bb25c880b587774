package main

import (
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/hfmodel"
)

// A text column and a token column together are refused: one of them
// would be read and the other ignored.
func TestTextAndTokensColumnsRefused(t *testing.T) {
	f := defaultSequenceFlags()
	f.text, f.tokens = "body", "input_ids"
	_, _, err := f.options(&hfmodel.Folder{MaxLength: 128}, true)
	if err == nil || !strings.Contains(err.Error(), "--text-column body and --tokens-column input_ids: give one") {
		t.Fatalf("got %v", err)
	}
}

// tokenize reads no feature tensor: its help does not offer the flags
// of one, and they are refused.
func TestTokenizeHasNoFeatureFlags(t *testing.T) {
	stdout, _, err := drainpipe("tokenize", "--help")
	if err != nil || strings.Contains(stdout, "--features") || strings.Contains(stdout, "--feature-column") {
		t.Fatalf("%v\n%s", err, stdout)
	}
	_, stderr, err := drainpipe("tokenize", "--tokenizer", "t.json", "--input", "in.csv", "--text-column", "body", "--output", "out.parquet", "--features", "f*")
	if err == nil || !strings.Contains(stderr, "unknown flag: --features") {
		t.Fatalf("--features: %v\n%s", err, stderr)
	}
	stdout, _, err = drainpipe("predict", "--help")
	if err != nil || !strings.Contains(stdout, "or a model folder") {
		t.Fatalf("predict --help does not say --model takes a folder: %v", err)
	}
}
