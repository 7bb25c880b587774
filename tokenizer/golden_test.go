package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
)

type goldenEncoding struct {
	IDs     []int64  `json:"ids"`
	TypeIDs []int64  `json:"type_ids"`
	Offsets [][2]int `json:"offsets"`
}

// golden reads the corpus the Rust tokenizers encoded
// (scripts/tokenizer-golden.js).
func golden(t testing.TB, family, name string) (texts, pairs []*string, want []goldenEncoding) {
	t.Helper()
	f, err := os.Open("testdata/golden-" + family + ".jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(z)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		var text string
		if err := json.Unmarshal(line["text"], &text); err != nil {
			t.Fatalf("corpus line %d: text: %v", len(texts)+1, err)
		}
		texts = append(texts, &text)
		var pair *string
		if raw, ok := line["pair"]; ok {
			pair = new(string)
			if err := json.Unmarshal(raw, pair); err != nil {
				t.Fatalf("corpus line %d: pair: %v", len(texts), err)
			}
		}
		pairs = append(pairs, pair)
		var e goldenEncoding
		if err := json.Unmarshal(line[name], &e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return texts, pairs, want
}

// must encodes text, failing t on an error.
func must(t testing.TB, tok *Tokenizer, text string) Encoding {
	t.Helper()
	e, err := tok.Encode(text)
	if err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	return e
}

// mustPair encodes a pair, failing t on an error.
func mustPair(t testing.TB, tok *Tokenizer, a, b string) Encoding {
	t.Helper()
	e, err := tok.EncodePair(a, b)
	if err != nil {
		t.Fatalf("%q, %q: %v", a, b, err)
	}
	return e
}

// TestGolden encodes every string of the corpus with each tokenizer and
// compares ids, type ids and offsets with the Rust tokenizers'.
func TestGolden(t *testing.T) {
	for _, c := range []struct{ family, name string }{
		{"bert", "bert-uncased"}, {"bert", "bert-cased"}, {"bert", "bert-cased-strip"}, {"bert", "bert-handwritten"},
		{"bpe", "bpe-roberta"}, {"bpe", "bpe-prefix-space"}, {"bpe", "bpe-legacy-merges"},
		{"unigram", "unigram-nfkc"}, {"unigram", "unigram-first"}, {"unigram", "unigram-precompiled"}, {"unigram", "unigram-xlmr"},
	} {
		name := c.name
		t.Run(name, func(t *testing.T) {
			tok, err := LoadFile("testdata/" + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			texts, pairs, want := golden(t, c.family, name)
			if len(texts) < 4000 {
				t.Fatalf("the corpus has %d strings", len(texts))
			}
			bad := 0
			for i, text := range texts {
				var got Encoding
				if pairs[i] != nil {
					got = mustPair(t, tok, *text, *pairs[i])
				} else {
					got = must(t, tok, *text)
				}
				w := want[i]
				if !slices.Equal(got.IDs, w.IDs) || !slices.Equal(got.TypeIDs, w.TypeIDs) || !slices.Equal(got.Offsets, w.Offsets) {
					bad++
					if bad <= 5 {
						t.Errorf("string %d %q: got\n ids %v\n offsets %v\n tokens %q\nwant\n ids %v\n offsets %v", i, *text, got.IDs, got.Offsets, got.Tokens, w.IDs, w.Offsets)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d strings differ from the Rust tokenizers'", bad, len(texts))
			}
			t.Log(fmt.Sprintf("%d strings equal", len(texts)-bad))
		})
	}
}

// TestEncoderTokenizer: the test encoder's tokenizer (a model folder's
// tokenizer.json) gives the ids the Rust tokenizers gave its texts.
func TestEncoderTokenizer(t *testing.T) {
	tok, err := LoadFile("../seq/testdata/encoder/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../seq/testdata/encoder/texts.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Texts []string  `json:"texts"`
		IDs   [][]int64 `json:"input_ids"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for i, text := range doc.Texts {
		if got := must(t, tok, text).IDs; !slices.Equal(got, doc.IDs[i]) {
			t.Fatalf("text %d %q: %v, the Rust tokenizers' %v", i, text, got, doc.IDs[i])
		}
	}
}
