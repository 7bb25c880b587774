package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/seqtest"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
)

// charTokens is a tokenizer of one token a character (its code point + 1)
// after a [CLS] of 101, cut at maxLen tokens, that counts its calls.
type charTokens struct {
	maxLen int
	calls  atomic.Int64
}

func (c *charTokens) encode(text, _ string, _ bool) (TextEncoding, error) {
	c.calls.Add(1)
	e := TextEncoding{IDs: []int64{101}, Tokens: []string{"[CLS]"}, Offsets: [][2]int{{0, 0}}, Special: []bool{true}}
	i := 0
	for _, r := range text {
		if len(e.IDs) == c.maxLen {
			e.Truncated = true
			break
		}
		e.IDs = append(e.IDs, int64(r)%900+1)
		e.Tokens, e.Offsets, e.Special = append(e.Tokens, string(r)), append(e.Offsets, [2]int{i, i + 1}), append(e.Special, false)
		i++
	}
	return e, nil
}

// embeddings is /v1/embeddings' answer, with float embeddings.
type embeddings struct {
	Data []struct {
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

// textSpec serves the test sequence model as "enc", with tok encoding
// its text when tok is not nil.
func textSpec(t *testing.T, tok *charTokens) ModelSpec {
	t.Helper()
	m, err := seq.New(&seqtest.Engine{Width: 4, Vocab: 1000}, seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(64)}))
	if err != nil {
		t.Fatal(err)
	}
	spec := ModelSpec{Name: "enc", Model: m, Sequence: m,
		Input:    arrow.NewSchema([]arrow.Field{{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil),
		Options:  []predict.Option{predict.WithBatchSizes(4), predict.WithAllocator(arrowtest.Allocator(t))},
		Batching: online.Options{MaxDelay: time.Millisecond}}
	if tok != nil {
		spec.Text = &TextModel{Encode: tok.encode, MaxLength: tok.maxLen}
	}
	return spec
}

// Every protocol encodes a text once: the usage, the length check and
// the model's ids come from that one encoding, and the embedding equals
// the one of the same ids sent as tokens.
func TestTextEncodedOnce(t *testing.T) {
	tok := &charTokens{maxLen: 16}
	r := serveTest(t, []ModelSpec{textSpec(t, tok)})
	texts := []string{"ab", "cdé", "f"}
	var byText, byIDs embeddings
	if code, b := r.do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "enc", "input": texts, "encoding_format": "float"}, &byText); code != http.StatusOK {
		t.Fatalf("texts: %d %s", code, b)
	}
	if n := tok.calls.Load(); n != 3 || byText.Usage.PromptTokens != 3+4+2 {
		t.Errorf("/v1/embeddings: %d encodings for 3 texts, usage %d; want 3 and 9", n, byText.Usage.PromptTokens)
	}
	ids := [][]int64{{101, 98, 99}, {101, 100, 101, 234}, {101, 103}}
	if code, b := r.do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "enc", "input": ids, "encoding_format": "float"}, &byIDs); code != http.StatusOK {
		t.Fatalf("ids: %d %s", code, b)
	}
	for i := range texts {
		if !slices.Equal(byText.Data[i].Embedding, byIDs.Data[i].Embedding) {
			t.Errorf("text %d: %v, its ids give %v", i, byText.Data[i].Embedding, byIDs.Data[i].Embedding)
		}
	}

	count := func(what string, want int64, do func()) {
		t.Helper()
		before := tok.calls.Load()
		do()
		if got := tok.calls.Load() - before; got != want {
			t.Errorf("%s: %d encodings, want %d", what, got, want)
		}
	}
	long := strings.Repeat("x", 40)
	count("/embed", 2, func() {
		var rows [][]float32
		if code, b := r.do(t, http.MethodPost, "/embed", map[string]any{"inputs": texts[:2]}, &rows); code != http.StatusOK || len(rows) != 2 {
			t.Errorf("/embed: %d %s", code, b)
		}
	})
	count("/embed of a long text, refused", 1, func() {
		if code, b := r.do(t, http.MethodPost, "/embed", map[string]any{"inputs": long}, nil); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "less than 16 tokens") {
			t.Errorf("/embed of a long text: %d %s", code, b)
		}
	})
	count("/embed of a long text, cut", 1, func() {
		if code, b := r.do(t, http.MethodPost, "/embed", map[string]any{"inputs": long, "truncate": true}, nil); code != http.StatusOK {
			t.Errorf("/embed truncate: %d %s", code, b)
		}
	})
	count("OIP", 3, func() {
		body := map[string]any{"inputs": []map[string]any{{"name": TextInput, "datatype": "BYTES", "shape": []int{3}, "data": texts}}}
		if code, b := r.do(t, http.MethodPost, "/v2/models/enc/infer", body, nil); code != http.StatusOK {
			t.Errorf("OIP text: %d %s", code, b)
		}
	})
	count("/tokenize", 1, func() {
		var toks [][]struct {
			Text        string
			Start, Stop *int
		}
		if code, b := r.do(t, http.MethodPost, "/tokenize", map[string]any{"inputs": "aé b"}, &toks); code != http.StatusOK {
			t.Fatalf("/tokenize: %d %s", code, b)
		}
		var spans []string
		for _, tk := range toks[0] {
			if tk.Start != nil {
				spans = append(spans, fmt.Sprintf("%s@%d-%d", tk.Text, *tk.Start, *tk.Stop))
			}
		}
		if got := strings.Join(spans, ","); got != "a@0-1,é@1-3, @3-4,b@4-5" {
			t.Errorf("/tokenize byte spans: %s", got)
		}
	})

	var meta modelMetadataJSON
	if code, b := r.do(t, http.MethodGet, "/v2/models/enc", nil, &meta); code != http.StatusOK || len(meta.Inputs) != 1 || meta.Inputs[0].Name != TextInput || meta.Inputs[0].Datatype != "BYTES" {
		t.Errorf("metadata: %d %s", code, b)
	}
	_, metrics := r.do(t, http.MethodGet, "/metrics", nil, nil)
	if !strings.Contains(string(metrics), `drainpipe_sequence_truncated_rows_total{model="enc",version="1"} 1`) {
		t.Errorf("the text cut is not counted:\n%s", grepLines(string(metrics), "truncated"))
	}
}

// A model served without a tokenizer takes token ids, and refuses text
// saying how to give it one.
func TestTextNeedsATokenizer(t *testing.T) {
	r := serveTest(t, []ModelSpec{textSpec(t, nil)})
	code, b := r.do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "enc", "input": "ab"}, nil)
	var e struct{ Error struct{ Message string } }
	if json.Unmarshal(b, &e); code != http.StatusBadRequest || !strings.Contains(e.Error.Message, "tokenizer.json") {
		t.Errorf("text to a model without a tokenizer: %d %s", code, b)
	}
	if code, b := r.do(t, http.MethodPost, "/embed", map[string]any{"inputs": "ab"}, nil); code != http.StatusNotFound {
		t.Errorf("/embed on a server of no text model: %d %s", code, b)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
