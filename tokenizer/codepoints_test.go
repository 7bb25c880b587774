package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// everyCodePoint returns strings that hold every code point of the
// planes in use (0–3, and 14's tags and selectors) and a sample of the
// others, 32 consecutive ones a string, each also alone between a
// letter and a digit: each one's class shows in how it splits,
// normalizes and merges.
func everyCodePoint() []textItem {
	var cps []rune
	for r := rune(0); r <= utf8.MaxRune; r++ {
		switch {
		case r >= 0xD800 && r <= 0xDFFF:
			continue
		case r < 0x40000, r >= 0xE0000 && r < 0xE1000, r%257 == 0:
			cps = append(cps, r)
		}
	}
	var items []textItem
	for i := 0; i < len(cps); i += 32 {
		run := cps[i:min(i+32, len(cps))]
		var b strings.Builder
		b.WriteString(string(run))
		b.WriteString(" |")
		for _, r := range run {
			b.WriteString(" a")
			b.WriteRune(r)
			b.WriteString("1")
		}
		items = append(items, textItem{Text: b.String()})
	}
	return items
}

// TestEveryCodePoint: every code point in use is classified, normalized,
// split and merged as the Rust tokenizers do it, through each table the
// package holds of another Unicode version: the BERT categories
// (Unicode 8.0), NF* (9.0), the byte-level and Qwen patterns (16.0), the
// scripts (9.0), \w and Lowercase, Digits and Punctuation, StripAccents.
func TestEveryCodePoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	items := everyCodePoint()
	wordLevel := func(pre any, nrm any) func(map[string]any) {
		return func(d map[string]any) {
			d["normalizer"], d["pre_tokenizer"] = nrm, pre
			d["post_processor"], d["decoder"] = nil, nil
			d["model"] = map[string]any{"type": "WordLevel", "vocab": map[string]any{"[UNK]": 0, "a": 1, "1": 2}, "unk_token": "[UNK]"}
			d["added_tokens"] = []any{}
		}
	}
	files := map[string]string{
		"bert-uncased":        "testdata/bert-uncased.json",
		"bert-cased-strip":    "testdata/bert-cased-strip.json",
		"unigram-nfkc":        "testdata/unigram-nfkc.json",
		"unigram-precompiled": "testdata/unigram-precompiled.json",
		"bpe-roberta":         "testdata/bpe-roberta.json",
		"qwen3":               realFile(t, "qwen3"),
		"scripts":             editedFile(t, "bert-uncased", wordLevel(map[string]any{"type": "UnicodeScripts"}, nil)),
		"whitespace-lowercase": editedFile(t, "bert-uncased", wordLevel(map[string]any{"type": "Whitespace"},
			map[string]any{"type": "Lowercase"})),
		"digits-punctuation-nfd-strip": editedFile(t, "bert-uncased", wordLevel(
			map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "WhitespaceSplit"}, map[string]any{"type": "Digits", "individual_digits": false}, map[string]any{"type": "Punctuation", "behavior": "Isolated"}}},
			map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFD"}, map[string]any{"type": "StripAccents"}}})),
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tok, err := LoadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, tok, items, reference(t, file, nil, false, items))
		})
	}
}

// TestKnownDifferences: the strings a differential fuzz found to differ
// before, each as the Rust tokenizers encode it.
func TestKnownDifferences(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	replace := editedFile(t, "bert-uncased", func(d map[string]any) {
		d["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": `\s+`}, "content": " "},
			map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": `\d`}, "content": "#"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": ""}, "content": "x"},
		}}
	})
	split := editedFile(t, "bert-uncased", func(d map[string]any) {
		d["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"String": ""}, "behavior": "MergedWithNext", "invert": false},
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\s*`}, "behavior": "Isolated", "invert": false},
		}}
		d["decoder"] = map[string]any{"type": "Replace", "pattern": map[string]any{"String": ""}, "content": "|"}
	})
	for _, c := range []struct{ file, text string }{
		{"testdata/bert-uncased.json", "\U0001e945"},
		{"testdata/unigram-nfkc.json", "\u089f\u0e38"},
		{"testdata/unigram-nfkc.json", "\ua7f3"},
		{"testdata/bpe-roberta.json", "\U0002ed54\ub9bf"},
		{"testdata/unigram-xlmr.json", "＜ｕｎｋ＞日"},
		{replace, "a\u0085b a\u3000b ٣4 𝟙"},
		{replace, ""},
		{split, "ab c\u0301d"},
	} {
		tok, err := LoadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		items := []textItem{{Text: c.text}}
		compare(t, tok, items, reference(t, c.file, nil, true, items))
	}
}
