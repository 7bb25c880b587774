package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// windowConfig is a window length and stride the tests cut texts with,
// and the texts it cuts (indices).
type windowConfig struct {
	MaxLength int   `json:"max_length"`
	Stride    int   `json:"stride"`
	Texts     []int `json:"texts"`
}

// refWindows are the windows the Rust tokenizers made of one text.
type refWindows struct {
	Windows []refEncoding `json:"windows"`
	Error   string        `json:"error"`
}

// referenceWindows cuts texts into windows with the Rust tokenizers
// (scripts/tokenizer-windows.js), as tokenizers 0.22.2 cut them: for
// each config, its texts' windows, in one run of node.
func referenceWindows(t testing.TB, file string, configs []windowConfig, texts []string) [][]refWindows {
	t.Helper()
	out := runRust(t, "tokenizer-windows.js", map[string]any{"file": file, "configs": configs, "texts": texts})
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<30)
	res := make([][]refWindows, len(configs))
	for i, c := range configs {
		for range c.Texts {
			var w refWindows
			if !sc.Scan() {
				t.Fatalf("node cut fewer texts than asked: %v", sc.Err())
			}
			if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
				t.Fatalf("node's windows: %v", err)
			}
			res[i] = append(res[i], w)
		}
	}
	return res
}

// compareWindows cuts each text with tok and holds its windows, in
// order, to the Rust tokenizers': every id, type id and offset.
func compareWindows(t *testing.T, tok *Tokenizer, c windowConfig, texts []string, want []refWindows) {
	t.Helper()
	bad, windows := 0, 0
	for k, i := range c.Texts {
		text := texts[i]
		var got []Encoding
		var err error
		for e, werr := range tok.Windows(text, c.MaxLength, c.Stride, 0) {
			if err = werr; err != nil {
				break
			}
			got = append(got, e)
		}
		w := want[k]
		why := ""
		switch {
		case (err != nil) != (w.Error != ""):
			why = fmt.Sprintf("error %v; the Rust tokenizers' %q", err, w.Error)
		case err != nil:
		case len(got) != len(w.Windows):
			why = fmt.Sprintf("%d windows, the Rust tokenizers %d", len(got), len(w.Windows))
		default:
			for k, g := range got {
				r := w.Windows[k]
				if !slices.Equal(g.IDs, r.IDs) || !slices.Equal(g.TypeIDs, r.TypeIDs) || !slices.Equal(g.Offsets, r.Offsets) {
					why = fmt.Sprintf("window %d: ids %v offsets %v; the Rust tokenizers' ids %v offsets %v", k, g.IDs, g.Offsets, r.IDs, r.Offsets)
					break
				}
			}
		}
		windows += len(got)
		if why != "" {
			if bad++; bad <= 5 {
				t.Errorf("text %d (%d bytes, %.60q): %.600s", i, len(text), text, why)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts cut otherwise than by the Rust tokenizers", bad, len(c.Texts))
	}
	t.Logf("%d texts, %d windows", len(c.Texts), windows)
}

// windowTexts are texts of 1 to some 2,000 tokens: the corpus's strings,
// hostile ones (valid UTF-8, as the script reads JSON), runs of them.
func windowTexts(t testing.TB, tok *Tokenizer) []string {
	texts, _, _ := golden(t, "bert", "bert-uncased")
	var out []string
	for i, s := range texts {
		if i%4 == 0 {
			out = append(out, *s)
		}
	}
	for _, s := range hostile(11, 150, addedTexts(tok)) {
		if utf8.ValidString(s) {
			out = append(out, s)
		}
	}
	for _, it := range longItems(t)[:6] {
		if it.Pair == nil {
			out = append(out, it.Text[:min(len(it.Text), 9000)])
		}
	}
	return append(out, "", "a")
}

// longDocument is a text of at least n tokens: the corpus's strings run
// together.
func longDocument(t testing.TB, tok *Tokenizer, n int) string {
	texts, _, _ := golden(t, "bert", "bert-uncased")
	var b strings.Builder
	for tokens := 0; tokens < n; {
		s := *texts[b.Len()%len(texts)] + " "
		toks, err := tok.tokens(s, -1)
		if err != nil {
			t.Fatal(err)
		}
		tokens += len(toks)
		b.WriteString(s)
	}
	return b.String()
}

// TestWindowsMatchRust: Windows cuts texts as the Rust tokenizers cut
// their whole encoding (0.22.2's overflowing windows), for strides 0, 1,
// 64 and the window's room less one, at lengths 16, 128 and 512, on a
// WordPiece, a RoBERTa BPE and a Unigram file and on the hub's Qwen3,
// Gemma 3 and Llama 3 files; a document of 100,000 tokens too.
func TestWindowsMatchRust(t *testing.T) {
	files := map[string]string{"wordpiece": "testdata/bert-uncased.json", "roberta": "testdata/bpe-roberta.json", "unigram": "testdata/unigram-xlmr.json"}
	if !testing.Short() {
		for _, name := range []string{"qwen3", "gemma3", "llama3"} {
			files[name] = realFile(t, name)
		}
	}
	for name, file := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file, _ = filepath.Abs(file)
			tok, err := LoadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			added := tok.addedBy(false)
			texts := windowTexts(t, tok)
			var short, all []int // a stride of the window's room less one cuts a window a token
			for i, text := range texts {
				if all = append(all, i); len(text) <= 600 {
					short = append(short, i)
				}
			}
			texts = append(texts, longDocument(t, tok, 100_000))
			doc := []int{len(texts) - 1}
			var configs []windowConfig
			for _, length := range []int{16, 128, 512} {
				for _, stride := range slices.Compact([]int{0, 1, min(64, length-added-1)}) {
					configs = append(configs, windowConfig{length, stride, all})
				}
				configs = append(configs, windowConfig{length, length - added - 1, short})
			}
			configs = append(configs, windowConfig{512, 0, doc}, windowConfig{512, 64, doc}, windowConfig{128, 1, doc})
			want := referenceWindows(t, file, configs, texts)
			for i, c := range configs {
				t.Run(fmt.Sprintf("%d-%d-%dtexts", c.MaxLength, c.Stride, len(c.Texts)), func(t *testing.T) {
					compareWindows(t, tok, c, texts, want[i])
				})
			}
		})
	}
}

// Windows refuses what the crate refuses: a stride the window leaves no
// room for, a window of special tokens alone, a text over its ceiling;
// and a stop mid-way ends the cut.
func TestWindowsRefuse(t *testing.T) {
	tok, err := LoadFile("testdata/bert-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	first := func(text string, length, stride, maxBytes int) error {
		for _, err := range tok.Windows(text, length, stride, maxBytes) {
			return err
		}
		return nil
	}
	for _, c := range []struct {
		length, stride, maxBytes int
		want                     error
	}{{16, 14, 0, ErrEncode}, {2, 0, 0, ErrEncode}, {16, -1, 0, ErrEncode}, {16, 0, 10, ErrTextTooLong}} {
		if err := first("a text of more than ten bytes", c.length, c.stride, c.maxBytes); !errors.Is(err, c.want) {
			t.Errorf("length %d stride %d ceiling %d: %v, want %v", c.length, c.stride, c.maxBytes, err, c.want)
		}
	}
	n := 0
	for range tok.Windows(strings.Repeat("word ", 100), 8, 0, 0) {
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("the cut went on after its consumer stopped: %d windows", n)
	}
}
