package tokenizer

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// longTexts are n texts of 3–30 KB: hostile strings between runs of
// plain words, so that plain spaces fall everywhere, before, inside and
// after what truncation keeps.
func longTexts(seed uint64, n int, added []string) []string {
	rng := rand.New(rand.NewPCG(seed, 3))
	words := strings.Fields("the licence grants you rights described below in full 12 a0 Zebra x9 qux")
	parts := hostile(seed, 4*n, added)
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		size := 3000 + rng.IntN(27000)
		for b.Len() < size {
			if rng.IntN(3) == 0 {
				b.WriteString(parts[rng.IntN(len(parts))])
			}
			for range rng.IntN(40) {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteByte(' ')
			}
		}
		out[i] = b.String()
	}
	return out
}

// headFiles are the files of testdata whose steps allow heads, and the
// real files named.
func headFiles(t *testing.T, real ...string) map[string]string {
	files := map[string]string{}
	for _, name := range []string{"bert-uncased", "bert-cased-strip", "bpe-roberta", "bpe-prefix-space", "unigram-nfkc", "unigram-xlmr", "unigram-first", "unigram-precompiled"} {
		files[name] = "testdata/" + name + ".json"
	}
	for _, name := range real {
		files[name] = realFile(t, name)
	}
	return files
}

// TestHeadsAsTheWholeText: long texts truncated to 8, 128 and 512
// tokens, single and in pairs, encode from their heads exactly as the
// Rust tokenizers encode them whole, for each file whose steps allow
// heads (and Gemma 3's, whose steps do not, has them off).
func TestHeadsAsTheWholeText(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	files := headFiles(t, "qwen3", "gemma3", "llama3")
	whole := map[string]bool{"gemma3": true} // no pre-tokenizer: one piece
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tok, err := LoadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if tok.cutHeads == whole[name] {
				t.Fatalf("heads %v, want %v", tok.cutHeads, !whole[name])
			}
			if whole[name] {
				return // read whole: TestDifferential
			}
			texts := longTexts(uint64(len(name)), 16, addedTexts(tok))
			var items []textItem
			for i, s := range texts {
				items = append(items, textItem{Text: s})
				if i%3 == 0 {
					items = append(items, textItem{Text: s, Pair: &texts[(i+1)%len(texts)]})
				}
			}
			for _, max := range []int{8, 128, 512} {
				tr := &Truncation{MaxLength: max}
				if err := tok.SetTruncation(tr); err != nil {
					t.Fatal(err)
				}
				compare(t, tok, items, reference(t, file, tr, false, items))
			}
		})
	}
}

// TestHeadsBoundMemory: a 16 MB text costs what its head costs, within
// a 1 MiB ceiling; a text without plain spaces, or a tokenizer whose
// steps do not allow heads, is ErrTextTooLong past the ceiling.
func TestHeadsBoundMemory(t *testing.T) {
	bert, err := LoadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := bert.SetTruncation(&Truncation{MaxLength: 512}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("the licence grants you the rights described below in full ", 16<<20/59)
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	var e Encoding
	bytes := allocated(func() { e, err = bert.EncodeWithin(long, 1<<20) })
	if err != nil || len(e.IDs) != 512 {
		t.Fatalf("16 MB text: %d ids, %v", len(e.IDs), err)
	}
	short, err := bert.Encode(long[:8<<10])
	if err != nil {
		t.Fatal(err)
	}
	for i := range e.IDs {
		if e.IDs[i] != short.IDs[i] {
			t.Fatalf("id %d: %d from the 16 MB text, %d from its first 8 KB", i, e.IDs[i], short.IDs[i])
		}
	}
	if bytes > 2<<20 {
		t.Errorf("a 16 MB text allocated %d bytes, want its head's (under 2 MiB)", bytes)
	}
	for name, c := range map[string]struct {
		text string
		tok  func() *Tokenizer
	}{
		"no plain space": {strings.Repeat("word, ", 1<<20), func() *Tokenizer { return bert }},
		"too few tokens": {strings.Repeat("a", 2<<20) + " b", func() *Tokenizer { return bert }},
		"no heads": {long[:4<<20], func() *Tokenizer {
			tok, err := LoadFile(editedFile(t, "bert-uncased", func(d map[string]any) { d["pre_tokenizer"] = nil }))
			if err != nil {
				t.Fatal(err)
			}
			if tok.cutHeads {
				t.Fatal("heads without a pre-tokenizer")
			}
			return tok
		}},
	} {
		if _, err := c.tok().EncodeWithin(c.text, 1<<20); !errors.Is(err, ErrTextTooLong) {
			t.Errorf("%s: %v, want ErrTextTooLong", name, err)
		}
	}
}

// TestHeadsRefused: the steps that could join what lies on either side
// of a plain space turn heads off.
func TestHeadsRefused(t *testing.T) {
	cases := map[string]func(d map[string]any){
		"a Metaspace that does not split": func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": false}
		},
		"a pattern of its own": func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\w+ \w+`}, "behavior": "Isolated", "invert": false}
		},
		"a space removed": func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": ""}
		},
		"a Replace over letters": func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"String": "a b"}, "content": "ab"}
		},
		"an added token with a space": func(d map[string]any) {
			d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 40000, "content": "a b", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": false})
		},
		"an added token taking the space after it": func(d map[string]any) {
			setAdded(d, "[MASK]", map[string]any{"rstrip": true})
		},
		"punctuation first": func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "Punctuation", "behavior": "Isolated"}, map[string]any{"type": "WhitespaceSplit"}}}
		},
	}
	for name, edit := range cases {
		tok, err := LoadFile(editedFile(t, "bert-uncased", edit))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tok.cutHeads {
			t.Errorf("%s: heads on", name)
		}
	}
}

// TestHeadsArePrefixes: at every plain space of hostile texts (the
// space between two words set against hostile strings), the tokens of
// the text cut there are the first tokens of the whole text's, for each
// file whose steps allow heads. TestDifferential holds the whole text's
// tokens to the Rust tokenizers'.
func TestHeadsArePrefixes(t *testing.T) {
	files := headFiles(t)
	if !testing.Short() {
		files = headFiles(t, "qwen3", "llama3")
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tok, err := LoadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !tok.cutHeads {
				t.Fatal("heads off")
			}
			parts := hostile(uint64(len(name)), 400, addedTexts(tok))
			cuts := 0
			for i := 0; i+3 < len(parts); i += 3 {
				text := parts[i] + "a " + parts[i+1] + "Z 0 9" + parts[i+2] + "q x" + parts[i+3]
				whole, err := tok.tokens(text, -1)
				if err != nil {
					continue // TestDifferential holds its errors to the crate's
				}
				for c := plainSpaceBefore(text, len(text)); c > 0; c = plainSpaceBefore(text, c-1) {
					cuts++
					head, err := tok.tokens(text[:c], -1)
					if err != nil {
						t.Fatalf("%q cut at %d: %v", text, c, err)
					}
					if len(head) > len(whole) {
						t.Fatalf("%q cut at %d: %d tokens, the whole text %d", text, c, len(head), len(whole))
					}
					for k := range head {
						if head[k].id != whole[k].id || head[k].offsets != whole[k].offsets {
							t.Fatalf("%q cut at %d: token %d is %q %v, the whole text's %q %v", text, c, k, head[k].value, head[k].offsets, whole[k].value, whole[k].offsets)
						}
					}
				}
			}
			if cuts < 400 {
				t.Errorf("%d cuts tried", cuts)
			}
		})
	}
}
