package tokenizer

import (
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile returns n seeded random strings across Unicode: every plane's
// letters and unassigned code points, combining marks, ZWJ sequences,
// controls, every white space, long words, and look-alikes of the given
// added tokens (cut, cased, spaced, doubled).
func hostile(seed uint64, n int, added []string) []string {
	rng := rand.New(rand.NewPCG(seed, 1))
	pick := func(rs ...[2]rune) rune {
		r := rs[rng.IntN(len(rs))]
		return r[0] + rune(rng.IntN(int(r[1]-r[0]+1)))
	}
	spaces := []rune{'\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xa0, 0x1680, 0x180e, 0x2000, 0x2005, 0x200a, 0x200b, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff}
	part := func(b *strings.Builder) {
		switch rng.IntN(13) {
		case 0: // ASCII words and punctuation
			for range 1 + rng.IntN(8) {
				b.WriteRune(pick([2]rune{'a', 'z'}, [2]rune{'A', 'Z'}, [2]rune{'0', '9'}, [2]rune{'!', '/'}, [2]rune{'\'', '\''}))
			}
		case 1: // letters of many scripts
			for range 1 + rng.IntN(6) {
				b.WriteRune(pick([2]rune{0xc0, 0x24f}, [2]rune{0x370, 0x3ff}, [2]rune{0x400, 0x4ff}, [2]rune{0x590, 0x6ff}, [2]rune{0x900, 0xdff}, [2]rune{0xe00, 0xeff}, [2]rune{0x1100, 0x11ff}, [2]rune{0x3040, 0x30ff}, [2]rune{0x4e00, 0x9fff}, [2]rune{0xac00, 0xd7a3}))
			}
		case 2: // combining marks after a base
			b.WriteRune(pick([2]rune{'a', 'z'}, [2]rune{0x3b1, 0x3c9}, [2]rune{0x915, 0x939}))
			for range 1 + rng.IntN(4) {
				b.WriteRune(pick([2]rune{0x300, 0x36f}, [2]rune{0x483, 0x489}, [2]rune{0x591, 0x5bd}, [2]rune{0x93c, 0x94d}, [2]rune{0x1ab0, 0x1aff}, [2]rune{0x1dc0, 0x1dff}, [2]rune{0x20d0, 0x20f0}, [2]rune{0xe31, 0xe3a}, [2]rune{0x8d3, 0x8ff}))
			}
		case 3: // emoji and ZWJ sequences, skin tones, flags
			b.WriteRune(pick([2]rune{0x1f300, 0x1faff}))
			for range rng.IntN(3) {
				b.WriteRune(0x200d)
				b.WriteRune(pick([2]rune{0x1f300, 0x1f9ff}, [2]rune{0x1f3fb, 0x1f3ff}, [2]rune{0x2640, 0x2642}, [2]rune{0xfe0f, 0xfe0f}))
			}
			if rng.IntN(3) == 0 {
				b.WriteRune(pick([2]rune{0x1f1e6, 0x1f1ff}))
				b.WriteRune(pick([2]rune{0x1f1e6, 0x1f1ff}))
			}
		case 4: // controls and format characters
			b.WriteRune(pick([2]rune{0, 0x1f}, [2]rune{0x7f, 0x9f}, [2]rune{0x200b, 0x200f}, [2]rune{0x2060, 0x206f}, [2]rune{0xfff9, 0xfffd}))
		case 5: // white space of every kind, in runs
			for range 1 + rng.IntN(4) {
				b.WriteRune(spaces[rng.IntN(len(spaces))])
			}
		case 6: // anywhere in the planes: astral letters, private use, unassigned
			for range 1 + rng.IntN(3) {
				b.WriteRune(pick([2]rune{0x10000, 0x1ffff}, [2]rune{0x20000, 0x3134f}, [2]rune{0xe0000, 0xe01ef}, [2]rune{0xf0000, 0xf00ff}, [2]rune{0x2ff0, 0x2fff}, [2]rune{0x1e900, 0x1e95f}, [2]rune{0x31350, 0x323af}))
			}
		case 7: // a long word
			r := pick([2]rune{'a', 'z'}, [2]rune{0x4e00, 0x4e10}, [2]rune{0x430, 0x44f})
			b.WriteString(strings.Repeat(string(r), 50+rng.IntN(300)))
		case 8: // compatibility and composed forms
			b.WriteRune(pick([2]rune{0xfb00, 0xfb4f}, [2]rune{0xff00, 0xffef}, [2]rune{0x2150, 0x218f}, [2]rune{0x3300, 0x33ff}, [2]rune{0x1e00, 0x1eff}, [2]rune{0xac00, 0xac20}, [2]rune{0x1d400, 0x1d7ff}, [2]rune{0xa7f0, 0xa7ff}))
		case 9, 10: // an added token, or one almost
			if len(added) == 0 {
				break
			}
			a := added[rng.IntN(len(added))]
			switch rng.IntN(6) {
			case 0:
				a = a[:rng.IntN(len(a)+1)]
			case 1:
				a = strings.ToUpper(a)
			case 2:
				a = " " + a + " "
			case 3:
				a += a
			}
			b.WriteString(a)
		case 11: // what Unicode 15.1 and 16.0 added: letters, digits, marks, cased pairs
			for range 1 + rng.IntN(4) {
				b.WriteRune(pick([2]rune{0x2ebf0, 0x2ee5d}, [2]rune{0x10d40, 0x10d8f}, [2]rune{0x105c0, 0x105f3}, [2]rune{0x11380, 0x113e2}, [2]rune{0x11bc0, 0x11bf9},
					[2]rune{0x16100, 0x16139}, [2]rune{0x16d40, 0x16d79}, [2]rune{0x1e5d0, 0x1e5ff}, [2]rune{0x116d0, 0x116e3}, [2]rune{0x1ccf0, 0x1ccf9},
					[2]rune{0xa7cb, 0xa7dc}, [2]rune{0x1c89, 0x1c8a}, [2]rune{0x2ffc, 0x2fff}, [2]rune{0x31ef, 0x31ef}))
			}
		default: // numbers and apostrophes
			b.WriteString([]string{"'s", "'S", "'ll", "'LL", "'Re", "'ſ", "12345", "٣٤٥", "１２", "⅔", "x'd", "'", "''"}[rng.IntN(13)])
		}
	}
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range rng.IntN(10) {
			part(&b)
			if rng.IntN(3) == 0 {
				b.WriteByte(' ')
			}
		}
		out[i] = b.String()
	}
	return out
}

// addedTexts are a tokenizer's added tokens' texts (the first 200 by
// id, so that a seed gives the same strings on every run).
func addedTexts(tok *Tokenizer) []string {
	ids := slices.Sorted(maps.Keys(tok.added.byID))
	var out []string
	for _, id := range ids[:min(len(ids), 200)] {
		out = append(out, tok.added.byID[id].Content)
	}
	return out
}

// hostileItems are n hostile strings and, of them, n/5 pairs.
func hostileItems(seed uint64, n int, added []string) []textItem {
	texts := hostile(seed, n+n/5, added)
	items := make([]textItem, 0, n+n/5)
	// A cut added token may end mid-character: such texts go as bytes.
	for _, s := range texts[:n] {
		items = append(items, textItem{Text: s, Bytes: !utf8.ValidString(s)})
	}
	for i, s := range texts[n:] {
		p := texts[i]
		items = append(items, textItem{Text: s, Pair: &p, Bytes: !utf8.ValidString(s + p)})
	}
	// Bytes that are not all UTF-8: some flipped, some cut mid-character.
	rng := rand.New(rand.NewPCG(seed, 2))
	for _, s := range texts[:n/10] {
		b := []byte(s)
		for range 1 + rng.IntN(3) {
			if len(b) > 0 {
				b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
			}
		}
		b = append(b, []byte("\xe2\x82 \xf0\x90\x80\xff")[:rng.IntN(8)]...)
		items = append(items, textItem{Text: string(b), Bytes: true})
	}
	return items
}

// TestDifferential: seeded hostile strings encode as the Rust
// tokenizers encode them, with each real file and each family the
// package's own files cover. CI runs it at its default size;
// DRAINPIPE_TOKENIZER_FUZZ sets another (and the seed moves with it).
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	n := 1500
	if v := os.Getenv("DRAINPIPE_TOKENIZER_FUZZ"); v != "" {
		if err := json.Unmarshal([]byte(v), &n); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{}
	for _, name := range []string{"bert-uncased", "bert-cased-strip", "bpe-roberta", "unigram-nfkc", "unigram-xlmr"} {
		files[name] = "testdata/" + name + ".json"
	}
	for _, name := range []string{"qwen3", "gemma3", "llama3"} {
		files[name] = realFile(t, name)
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tok, err := LoadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			items := hostileItems(uint64(n)+uint64(len(name)), n, addedTexts(tok))
			compare(t, tok, items, reference(t, file, nil, true, items))
		})
	}
}

// editedFile writes a tokenizer.json of testdata with edit applied.
func editedFile(t testing.TB, name string, edit func(doc map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// setAdded sets fields of the added token with the given text.
func setAdded(doc map[string]any, content string, fields map[string]any) {
	for _, a := range doc["added_tokens"].([]any) {
		if a := a.(map[string]any); a["content"] == content {
			for k, v := range fields {
				a[k] = v
			}
		}
	}
}

// TestAddedTokenSettings: the added-token settings transformers writes
// into RoBERTa's and XLM-R's files (<mask> with lstrip; the others
// normalized), and every other setting on its own, equal the Rust
// tokenizers on strings made to meet them.
func TestAddedTokenSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	cases := map[string]struct {
		base string
		edit func(map[string]any)
	}{
		"roberta": {"bpe-roberta", func(d map[string]any) {
			for _, c := range []string{"<s>", "<pad>", "</s>", "<unk>"} {
				setAdded(d, c, map[string]any{"normalized": true})
			}
			setAdded(d, "<mask>", map[string]any{"lstrip": true})
		}},
		"xlmr": {"unigram-xlmr", func(d map[string]any) {
			for _, c := range []string{"<s>", "<pad>", "</s>", "<unk>"} {
				setAdded(d, c, map[string]any{"normalized": false})
			}
			d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 250001, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": false, "normalized": true, "special": true})
		}},
		"bert-normalized": {"bert-uncased", func(d map[string]any) {
			setAdded(d, "[MASK]", map[string]any{"normalized": true, "special": true})
			d["added_tokens"] = append(d["added_tokens"].([]any),
				map[string]any{"id": 40000, "content": "Yesterday", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false},
				map[string]any{"id": 40001, "content": "<word>", "single_word": true, "lstrip": false, "rstrip": true, "normalized": false, "special": false},
				map[string]any{"id": 40002, "content": "ab", "single_word": true, "lstrip": true, "rstrip": true, "normalized": false, "special": false})
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			file := editedFile(t, c.base, c.edit)
			tok, err := LoadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			added := addedTexts(tok)
			added = append(added, "yesterday", "YESTERDAY", "[mask]", "xab", "abx", "a<word>b")
			items := hostileItems(7, 600, added)
			for _, s := range []string{"Hello <mask>!", "Hello   <mask>  there", "<mask>", " <mask>", "a\u00a0<mask>", "<s>x</s>", "I read a book Yesterday", "[MASK] [mask]", "ab ab xab", "ab<word>ab <word>"} {
				items = append(items, textItem{Text: s})
			}
			compare(t, tok, items, reference(t, file, nil, true, items))
		})
	}
}

// TestTruncationAsTheCrate: pairs of long texts cut to odd and even
// budgets by every strategy and direction, strides, and budgets the
// special tokens leave no room for, as the Rust tokenizers do them.
func TestTruncationAsTheCrate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node")
	}
	long := strings.Repeat("the licence grants you the rights described below in full ", 20)
	short := "a short one"
	var items []textItem
	for _, a := range []string{long, long[:200], short, ""} {
		items = append(items, textItem{Text: a})
		for _, b := range []string{long, long[:150], short, ""} {
			items = append(items, textItem{Text: a, Pair: &b})
		}
	}
	for _, tr := range []Truncation{
		{MaxLength: 509}, {MaxLength: 64}, {MaxLength: 65}, {MaxLength: 7}, {MaxLength: 4}, {MaxLength: 3}, {MaxLength: 2}, {MaxLength: 0},
		{MaxLength: 65, Direction: "Left"}, {MaxLength: 64, Strategy: "OnlyFirst"}, {MaxLength: 64, Strategy: "OnlySecond"},
		{MaxLength: 33, Strategy: "OnlySecond", Direction: "Left"}, {MaxLength: 64, Stride: 8},
	} {
		t.Run(strings.ReplaceAll(strings.Trim(strings.ReplaceAll(jsonString(tr), `"`, ""), "{}"), ",", " "), func(t *testing.T) {
			tok, err := LoadFile("testdata/bert-uncased.json")
			if err != nil {
				t.Fatal(err)
			}
			if err := tok.SetTruncation(&tr); err != nil {
				t.Fatal(err)
			}
			want := reference(t, "testdata/bert-uncased.json", &tr, false, items)
			// A max_length below the special tokens wraps around in the
			// crate (unsigned), which then truncates nothing; here it is
			// an error.
			var fits []textItem
			var fitsWant []refEncoding
			for i, it := range items {
				if tr.MaxLength >= tok.addedBy(it.Pair != nil) {
					fits, fitsWant = append(fits, it), append(fitsWant, want[i])
					continue
				}
				if _, err := tok.encode(it.Text, deref(it.Pair), it.Pair != nil, 0); !errors.Is(err, ErrEncode) {
					t.Errorf("item %d: max_length %d below the special tokens: %v", i, tr.MaxLength, err)
				}
				if w := want[i]; w.Error == "" && len(w.IDs) <= tr.MaxLength && len(it.Text) > 0 {
					t.Errorf("item %d: the crate truncated to %d tokens", i, len(w.IDs))
				}
			}
			if len(fits) > 0 {
				compare(t, tok, fits, fitsWant)
			}
		})
	}
	// A stride the kept tokens leave no room for aborts node (a panic in
	// the crate); here it is an error.
	tok, err := LoadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.SetTruncation(&Truncation{MaxLength: 12, Stride: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := tok.EncodePair(long, long); !errors.Is(err, ErrEncode) {
		t.Errorf("stride 8 of 4 kept tokens: %v", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
