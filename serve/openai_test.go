package serve

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
)

// The inputs OpenAI's API takes parse to texts or token arrays; the
// rest is refused with what is wrong.
func TestParseEmbeddingInput(t *testing.T) {
	for raw, want := range map[string]struct {
		texts, tokens int
		err           string
	}{
		`"a text"`:       {texts: 1},
		`""`:             {texts: 1},
		`["a", "b", ""]`: {texts: 3},
		`[1, 2, 3]`:      {tokens: 1},
		`[[1, 2], [3]]`:  {tokens: 2},
		`[]`:             {err: "empty"},
		`null`:           {err: "missing"},
		`[[1], []]`:      {err: "input 1 is an empty array"},
		`["a", 1]`:       {err: "mixes kinds"},
		`[1, "a"]`:       {err: "mixes kinds"},
		`{"text": "a"}`:  {err: "not a string"},
		`[1.5]`:          {err: "mixes kinds"},
		`[[1], ["a"]]`:   {err: "mixes kinds"},
		`[` + strings.Repeat(`"x",`, MaxEmbeddingInputs) + `"x"]`: {err: "2049 texts"},
	} {
		in, err := parseEmbeddingInput(json.RawMessage(raw))
		short := raw[:min(len(raw), 30)]
		switch {
		case want.err != "" && (err == nil || !strings.Contains(err.Error(), want.err)):
			t.Errorf("%s: %v, want an error saying %q", short, err, want.err)
		case want.err == "" && (err != nil || len(in.texts) != want.texts || len(in.tokens) != want.tokens):
			t.Errorf("%s: %d texts, %d token arrays, %v", short, len(in.texts), len(in.tokens), err)
		}
	}
}

// dimensions keeps the first d elements at unit length; base64 is the
// float32s' little-endian bytes.
func TestShortenAndBase64(t *testing.T) {
	v := shorten([]float32{3, 4, 12}, 2)
	if len(v) != 2 || math.Abs(float64(v[0])-0.6) > 1e-7 || math.Abs(float64(v[1])-0.8) > 1e-7 {
		t.Errorf("shorten: %v", v)
	}
	if got := base64Floats([]float32{1, -2}); got != "AACAPwAAAMA=" {
		t.Errorf("base64: %s", got)
	}
}

// A server with API keys takes a request bearing any one of them, and
// no other.
func TestAuthorized(t *testing.T) {
	s := &Server{}
	WithAPIKeys("k1", "k2")(&s.cfg)
	for header, want := range map[string]bool{"Bearer k1": true, "Bearer k2": true, "Bearer k3": false, "k1": false, "": false, "Bearer ": false, "Bearer k1 ": false} {
		r, _ := http.NewRequest(http.MethodGet, "/v1/models", nil)
		r.Header.Set("Authorization", header)
		if got := s.authorized(r); got != want {
			t.Errorf("%q: %v, want %v", header, got, want)
		}
	}
	if !(&Server{}).authorized(&http.Request{Header: http.Header{}}) {
		t.Error("a server without keys refuses a request")
	}
}
