package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// bertJSON returns the uncased test tokenizer's tokenizer.json, with edit
// applied to its decoded form.
func bertJSON(t testing.TB, edit func(map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(doc)
	}
	out, _ := json.Marshal(doc)
	return string(out)
}

// A component the package does not implement fails the load, naming it.
func TestLoadRefusesWhatItDoesNotImplement(t *testing.T) {
	for want, edit := range map[string]func(map[string]any){
		`pre_tokenizer "FixedLength"`: func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "FixedLength", "length": 5} },
		`model "Bogus"`:               func(d map[string]any) { d["model"].(map[string]any)["type"] = "Bogus" },
		`post_processor "Bogus"`:      func(d map[string]any) { d["post_processor"] = map[string]any{"type": "Bogus"} },
		`decoder "CTC"`:               func(d map[string]any) { d["decoder"] = map[string]any{"type": "CTC"} },
		"regular expression": func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(unclosed`}, "behavior": "Isolated", "invert": false}
		},
	} {
		_, err := Load(strings.NewReader(bertJSON(t, edit)))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", want, err)
		}
	}
	for name, doc := range map[string]string{
		"truncated JSON":              `{"model": `,
		"null":                        `null`,
		"data after the object":       bertJSON(t, nil) + ` {}`,
		"nested 200 deep":             strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200),
		"a negative max_length":       bertJSON(t, func(d map[string]any) { d["truncation"] = map[string]any{"max_length": -1} }),
		"a stride past the room":      bertJSON(t, func(d map[string]any) { d["truncation"] = map[string]any{"max_length": 4, "stride": 3} }),
		"max_input_chars_per_word -1": bertJSON(t, func(d map[string]any) { d["model"].(map[string]any)["max_input_chars_per_word"] = -1 }),
		"an id past int32":            bertJSON(t, func(d map[string]any) { d["model"].(map[string]any)["vocab"].(map[string]any)["the"] = 1 << 40 }),
		"a negative added id":         bertJSON(t, func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = -1 }),
		"invalid UTF-8":               strings.Replace(bertJSON(t, nil), `"[MASK]"`, "\"[MA\xffSK]\"", 1),
	} {
		if _, err := Load(strings.NewReader(doc)); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Load(strings.NewReader(bertJSON(t, func(d map[string]any) { d["model"].(map[string]any)["unk_token"] = "<unk>" }))); !errors.Is(err, ErrFormat) {
		t.Errorf("unk_token not in the vocabulary: %v", err)
	}
}

// Truncation as tokenizer.json sets it: the post-processor's tokens
// count; a pair loses from the longer text first.
func TestTruncation(t *testing.T) {
	tok, err := Load(strings.NewReader(bertJSON(t, func(d map[string]any) {
		d["truncation"] = map[string]any{"max_length": 8, "strategy": "LongestFirst", "direction": "Right", "stride": 0}
	})))
	if err != nil {
		t.Fatal(err)
	}
	full, _ := LoadFile("testdata/bert-uncased.json")
	long := "the licence grants you the rights described below in full"
	if e := must(t, tok, long); len(e.IDs) != 8 || !slices.Equal(e.IDs[:7], must(t, full, long).IDs[:7]) || e.Tokens[7] != "[SEP]" {
		t.Fatalf("single: %v %q", e.IDs, e.Tokens)
	}
	e := mustPair(t, tok, long, "short")
	if len(e.IDs) != 8 || e.TypeIDs[len(e.TypeIDs)-1] != 1 || e.Tokens[len(e.Tokens)-2] != "short" {
		t.Fatalf("pair: %q %v", e.Tokens, e.TypeIDs)
	}
}

// Bytes that are not UTF-8 are read as U+FFFD, one a maximal invalid
// subpart, which clean_text removes; offsets count the characters so
// read.
func TestInvalidUTF8(t *testing.T) {
	tok, err := LoadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	got := must(t, tok, "ab\xff\xffcd \xe2\x82 \xf0\x90\x80x")
	want := must(t, tok, "ab\ufffd\ufffdcd \ufffd \ufffdx")
	if !slices.Equal(got.IDs, want.IDs) || !slices.Equal(got.Offsets, want.Offsets) {
		t.Fatalf("%v %v, want %v %v", got.IDs, got.Offsets, want.IDs, want.Offsets)
	}
}

// FuzzEncode: any text encodes without a panic (WordPiece, byte-level
// BPE and Unigram), the same twice, with ids in the vocabulary and offsets
// within the text.
func FuzzEncode(f *testing.F) {
	var toks []*Tokenizer
	for _, name := range []string{"bert-cased-strip", "bpe-prefix-space", "unigram-nfkc", "unigram-xlmr"} {
		tok, err := LoadFile("testdata/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		toks = append(toks, tok)
	}
	for _, s := range []string{"", "Héllo, wörld!", "[MASK] a\u0301\u0336\u034e", "你好 👨‍👩‍👧 \x00\xff"} {
		f.Add(s, "")
		f.Add(s, "pair")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, tok := range toks {
			checkEncoding(t, tok, a, b)
		}
	})
}

func checkEncoding(t *testing.T, tok *Tokenizer, a, b string) {
	e := mustPair(t, tok, a, b)
	again := mustPair(t, tok, a, b)
	if !slices.Equal(e.IDs, again.IDs) || !slices.Equal(e.Offsets, again.Offsets) {
		t.Fatal("two encodings differ")
	}
	n := max(utf8.RuneCountInString(a), utf8.RuneCountInString(b))
	for i, id := range e.IDs {
		if id < 0 || id >= int64(tok.model.vocabSize()) {
			t.Fatalf("id %d", id)
		}
		if o := e.Offsets[i]; o[0] < 0 || o[0] > o[1] || o[1] > n {
			t.Fatalf("offsets %v of %d characters", o, n)
		}
	}
}

// A hostile text — 917,504 letters without a space, one piece for
// byte-level BPE — encodes (in n log n merges: the quadratic loop this
// replaced did not finish), to the tokens the same text gives in parts:
// for BPE and Unigram, "licence" × 16's head and tail, and between them
// the tokens of eight more "licence" over and over; for WordPiece one
// unknown token, the word being over its 100 characters.
func TestLongWord(t *testing.T) {
	const reps = 1 << 17
	for _, name := range []string{"bpe-roberta", "bert-uncased", "unigram-nfkc"} {
		tok, err := LoadFile("testdata/" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("licence", reps)
		e := must(t, tok, long)
		if o := e.Offsets[len(e.Offsets)-2]; o[1] != len(long) {
			t.Fatalf("%s: the last token ends at %d of %d", name, o[1], len(long))
		}
		c8 := must(t, tok, strings.Repeat("licence", 8)).IDs
		c16 := must(t, tok, strings.Repeat("licence", 16)).IDs
		if name == "bert-uncased" {
			want := []int64{c8[0], int64(tok.model.(*wordPiece).unk), c8[len(c8)-1]}
			if !slices.Equal(e.IDs, want) {
				t.Fatalf("%s: %v, want %v", name, e.IDs, want)
			}
			continue
		}
		q := len(c16) - len(c8) // the tokens of eight more
		head, tail := len(c8)-1, q+1
		got := e.IDs
		if len(got) != len(c8)+q*(reps/8-1) || !slices.Equal(got[:head], c16[:head]) || !slices.Equal(got[len(got)-tail:], c16[len(c16)-tail:]) {
			t.Fatalf("%s: %d tokens, want %d, with \"licence\" × 16's head and tail", name, len(got), len(c8)+q*(reps/8-1))
		}
		for i := head; i < len(got)-tail; i++ {
			if got[i] != c16[head+(i-head)%q] {
				t.Fatalf("%s: token %d is %d, not the parts' %d", name, i, got[i], c16[head+(i-head)%q])
			}
		}
	}
}

// Hostile files: a clear load error, or a bounded encode.
func TestHostileFiles(t *testing.T) {
	split := func(pattern string) func(map[string]any) {
		return func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false}
		}
	}
	// A pattern that backtracks without end fails the encoding in
	// bounded time (Oniguruma stops it too, at ten million steps).
	tok, err := Load(strings.NewReader(bertJSON(t, split(`(a+)+$`))))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := tok.Encode(strings.Repeat("a", 40) + "!"); !errors.Is(err, ErrPattern) {
		t.Errorf("(a+)+$ on 40 a's: %v", err)
	}
	t.Logf("(a+)+$ on 40 a's: an error after %v", time.Since(start).Round(time.Millisecond))
	// 10,000 nested Sequences: refused before they are read.
	nested := `{"type": "Lowercase"}`
	for range 10000 {
		nested = `{"type": "Sequence", "normalizers": [` + nested + `]}`
	}
	start = time.Now()
	if _, err := Load(strings.NewReader(`{"normalizer": ` + nested + `, "model": {"type": "WordLevel", "vocab": {}, "unk_token": "x"}}`)); !errors.Is(err, ErrFormat) {
		t.Errorf("10,000 nested Sequences: %v", err)
	}
	t.Logf("10,000 nested Sequences: refused in %v", time.Since(start).Round(time.Microsecond))
	for name, edit := range map[string]func(map[string]any){
		"a merge of a missing token": func(d map[string]any) {
			d["model"] = map[string]any{"type": "BPE", "vocab": map[string]any{"a": 0, "b": 1, "ab": 2}, "merges": []any{"a c"}}
		},
		"an unk_id past the pieces": func(d map[string]any) {
			d["model"] = map[string]any{"type": "Unigram", "vocab": []any{[]any{"a", -1.0}}, "unk_id": 5}
		},
		"a template's special token without ids": func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{map[string]any{"SpecialToken": map[string]any{"id": "[X]", "type_id": 0}}}, "pair": []any{}, "special_tokens": map[string]any{}}
		},
	} {
		if _, err := Load(strings.NewReader(bertJSON(t, edit))); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A charsmap whose value points past its strings.
	data, err := os.ReadFile("testdata/unigram-precompiled.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	nrm := doc["normalizer"].(map[string]any)
	cm, err := base64.StdEncoding.DecodeString(nrm["precompiled_charsmap"].(string))
	if err != nil {
		t.Fatal(err)
	}
	size := int(binary.LittleEndian.Uint32(cm))
	for i := 4; i < 4+size; i += 4 {
		if u := binary.LittleEndian.Uint32(cm[i:]); u&(1<<31) != 0 {
			binary.LittleEndian.PutUint32(cm[i:], 1<<31|1<<30)
			break
		}
	}
	nrm["precompiled_charsmap"] = base64.StdEncoding.EncodeToString(cm)
	bad, _ := json.Marshal(doc)
	if _, err := Load(bytes.NewReader(bad)); !errors.Is(err, ErrFormat) {
		t.Errorf("a charsmap pointing past its strings: %v", err)
	}
	// An empty added token is left out, as the crate leaves it out.
	tok, err = Load(strings.NewReader(bertJSON(t, func(d map[string]any) {
		d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 1, "content": "", "special": true})
	})))
	if err != nil {
		t.Fatal(err)
	}
	must(t, tok, "an empty added token")
}
