package serve

import (
	"math"
	"net/http"
	"strings"
	"testing"
)

// windows cuts a text into windows of maxLen tokens ([CLS] and the
// characters), each next one starting stride characters before the last
// ended, as tokenizer.Windows does.
func (c *charTokens) windows(stride int) func(string) ([]TextEncoding, error) {
	return func(text string) ([]TextEncoding, error) {
		runes := []rune(text)
		room := c.maxLen - 1
		var out []TextEncoding
		for start := 0; ; start += room - stride {
			stop := min(start+room, len(runes))
			e, _ := (&charTokens{maxLen: c.maxLen}).encode(string(runes[start:stop]), "", false)
			for i := range e.Offsets[1:] {
				e.Offsets[i+1] = [2]int{start + i, start + i + 1}
			}
			if out = append(out, e); stop == len(runes) {
				return out, nil
			}
		}
	}
}

// A text longer than the model keeps, on a server that pools windows,
// answers one embedding: its windows' embeddings (each as its token ids
// alone answer) averaged, weighted by their tokens, on /v1/embeddings
// and on TEI's /embed without truncate; truncate still cuts; the usage
// counts every window's tokens; a text of too many windows is refused.
func TestLongTextPooledFromWindows(t *testing.T) {
	tok := &charTokens{maxLen: 8}
	spec := textSpec(t, tok)
	spec.Text.Windows = tok.windows(2)
	r := serveTest(t, []ModelSpec{spec})
	long := "the quick brown fox jumps over the lazy dog"
	var pooled, byIDs embeddings
	if code, b := r.do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "enc", "input": []string{"short", long}, "encoding_format": "float"}, &pooled); code != http.StatusOK || len(pooled.Data) != 2 {
		t.Fatalf("%d %s", code, b)
	}
	windows, _ := spec.Text.Windows(long)
	var ids [][]int64
	want := make([]float64, 4)
	tokens, weight := 6, 0.0 // "short": [CLS] and 5
	for _, w := range windows {
		ids = append(ids, w.IDs)
		tokens += len(w.IDs)
	}
	if code, b := r.do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "enc", "input": ids, "encoding_format": "float"}, &byIDs); code != http.StatusOK {
		t.Fatalf("windows as ids: %d %s", code, b)
	}
	for i, d := range byIDs.Data {
		for j, x := range d.Embedding {
			want[j] += float64(len(ids[i])) * float64(x)
		}
		weight += float64(len(ids[i]))
	}
	for j := range want {
		if got := float64(pooled.Data[1].Embedding[j]); math.Abs(got-want[j]/weight) > 1e-6 {
			t.Fatalf("pooled %v, the windows' weighted mean %v (%d windows)", pooled.Data[1].Embedding, want, len(windows))
		}
	}
	if pooled.Usage.PromptTokens != tokens || len(windows) < 5 {
		t.Errorf("usage %d tokens, the %d windows and the short text hold %d", pooled.Usage.PromptTokens, len(windows), tokens)
	}

	var tei, cut [][]float32
	if code, b := r.do(t, http.MethodPost, "/embed", map[string]any{"inputs": long, "normalize": false}, &tei); code != http.StatusOK {
		t.Fatalf("/embed of a long text, pooled: %d %s", code, b)
	}
	for j := range want {
		if math.Abs(float64(tei[0][j])-want[j]/weight) > 1e-6 {
			t.Fatalf("/embed pooled %v, the windows' weighted mean %v", tei[0], want)
		}
	}
	if code, b := r.do(t, http.MethodPost, "/embed", map[string]any{"inputs": long, "truncate": true, "normalize": false}, &cut); code != http.StatusOK || cut[0][0] != byIDs.Data[0].Embedding[0] {
		t.Errorf("/embed truncate: %d %s, want the first window's %v", code, b, byIDs.Data[0].Embedding)
	}
	if code, b := r.do(t, http.MethodPost, "/v1/embeddings", map[string]any{"model": "enc", "input": strings.Repeat("x", 400)}, nil); code != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "windows") {
		t.Errorf("a text of 80 windows, past the queue's 64 rows: %d %s", code, b)
	}
}

// A model whose embeddings are unit length pools to unit length.
func TestPooledNormalized(t *testing.T) {
	v := poolWindows([][]float32{{3, 0}, {0, 4}}, []TextEncoding{{IDs: make([]int64, 2)}, {IDs: make([]int64, 1)}}, []int{0, 0}, 1, true)
	if n := math.Hypot(float64(v[0][0]), float64(v[0][1])); math.Abs(n-1) > 1e-6 || math.Abs(float64(v[0][0])-0.8320503) > 1e-6 {
		t.Errorf("pooled %v (norm %v), want (6, 4) at unit length", v[0], n)
	}
	v = poolWindows([][]float32{{3, 0}, {0, 4}}, []TextEncoding{{IDs: make([]int64, 2)}, {IDs: make([]int64, 1)}}, []int{0, 0}, 1, false)
	if v[0][0] != 2 || math.Abs(float64(v[0][1])-4.0/3) > 1e-6 {
		t.Errorf("pooled %v, want (6, 4) / 3", v[0])
	}
}
