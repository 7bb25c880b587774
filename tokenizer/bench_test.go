package tokenizer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"os"
	"testing"
)

// BenchmarkEncode encodes the golden corpus's strings with a
// tokenizer.json (DRAINPIPE_TOKENIZER names one; the byte-level BPE
// test file without).
func BenchmarkEncode(b *testing.B) {
	tok := benchTokenizer(b)
	texts, _, _ := golden(b, "bert", "bert-uncased")
	bytes := 0
	for _, t := range texts {
		bytes += len(*t)
	}
	b.SetBytes(int64(bytes))
	for b.Loop() {
		for _, t := range texts {
			if _, err := tok.Encode(*t); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkEncodeRows encodes the corpus as a text column on 1 and 2
// goroutines.
func BenchmarkEncodeRows(b *testing.B) {
	tok := benchTokenizer(b)
	texts, _, _ := golden(b, "bert", "bert-uncased")
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	for _, t := range texts {
		sb.Append(*t)
	}
	col := sb.NewArray()
	defer col.Release()
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprint("workers=", w), func(b *testing.B) {
			for b.Loop() {
				if _, errs := encodeRows(tok, rowsIn{texts: col, column: "body"}, w, false); errors.Join(errs...) != nil {
					b.Fatal(errors.Join(errs...))
				}
			}
		})
	}
}

// BenchmarkAddedTokens encodes the corpus with BERT's 5 added tokens and
// with 6,415 (as Gemma 3's file has): the trie makes them cost alike.
func BenchmarkAddedTokens(b *testing.B) {
	texts, _, _ := golden(b, "bert", "bert-uncased")
	for _, n := range []int{0, 6410} {
		tok, err := Load(strings.NewReader(bertJSON(b, func(d map[string]any) {
			for i := range n {
				d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 40000 + i, "content": fmt.Sprintf("<unused%d>", i), "special": true})
			}
		})))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint("added=", len(tok.added.byID)), func(b *testing.B) {
			for b.Loop() {
				for _, t := range texts {
					if _, err := tok.Encode(*t); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// benchTokenizer loads the tokenizer.json DRAINPIPE_TOKENIZER names, or
// the byte-level BPE test file.
func benchTokenizer(b *testing.B) *Tokenizer {
	file := os.Getenv("DRAINPIPE_TOKENIZER")
	if file == "" {
		file = "testdata/bpe-roberta.json"
	}
	tok, err := LoadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	return tok
}
