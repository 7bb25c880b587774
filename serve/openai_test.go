package serve

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The inputs OpenAI's API takes parse to texts or token arrays; the
// rest is refused with what is wrong.
func TestParseEmbeddingInput(t *testing.T) {
	for raw, want := range map[string]struct {
		texts, tokens int
		err           string
	}{
		`"a text"`:               {texts: 1},
		`""`:                     {texts: 1},
		`["a", "b", ""]`:         {texts: 3},
		`[1, 2, 3]`:              {tokens: 1},
		`[[1, 2], [3]]`:          {tokens: 2},
		`[]`:                     {err: "empty"},
		`null`:                   {err: "missing"},
		`[[1], []]`:              {err: "input 1 is an empty array"},
		`["a", 1]`:               {err: "mixes kinds"},
		`[1, "a"]`:               {err: "token 1 is not an integer"},
		`{"text": "a"}`:          {err: "not a string"},
		`[1.5]`:                  {err: "token 0 is not an integer"},
		`[1e3]`:                  {err: "token 0 is not an integer"},
		`[[1], ["a"]]`:           {err: "input 1: token 0 is not an integer"},
		`[[1] [2]]`:              {err: "want , or ]"},
		`[[1], [2]] x`:           {err: "follows"},
		`[[1, 2`:                 {err: "want , or ]"},
		`[99999999999999999999]`: {err: "not an integer"},
		`[` + strings.Repeat(`"x",`, MaxEmbeddingInputs) + `"x"]`:   {err: "2049 texts"},
		`[` + strings.Repeat(`[1],`, MaxEmbeddingInputs) + `[1]]`:   {err: "more than 2048 token arrays"},
		` [ [ 1 , 2 ] , [ 3 ] ] `:                                   {tokens: 2},
		`[` + strings.Repeat(`"x",`, MaxEmbeddingInputs-1) + `"x"]`: {texts: MaxEmbeddingInputs},
	} {
		in, err := parseEmbeddingInput(json.RawMessage(raw), 1<<20)
		short := raw[:min(len(raw), 30)]
		switch {
		case want.err != "" && (err == nil || !strings.Contains(err.Error(), want.err)):
			t.Errorf("%s: %v, want an error saying %q", short, err, want.err)
		case want.err == "" && (err != nil || len(in.texts) != want.texts || len(in.tokens) != want.tokens):
			t.Errorf("%s: %d texts, %d token arrays, %v", short, len(in.texts), len(in.tokens), err)
		}
	}
}

// A body of token ids allocates what the model keeps of them, not what
// the body holds: 8 MiB of ids in one array, cut at 512, allocates
// kilobytes; ids past the cut are still read and checked; a model that
// takes text refuses ids unread.
func TestTokenIDsBoundedByWhatIsKept(t *testing.T) {
	body := append([]byte("[["), bytes.Repeat([]byte("0,"), 4<<20)...)
	body = append(body, "7]]"...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	in, err := parseEmbeddingInput(body, 512)
	runtime.ReadMemStats(&after)
	if err != nil || len(in.tokens) != 1 || len(in.tokens[0]) != 512 {
		t.Fatalf("%d rows, %v", len(in.tokens), err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("allocated %d bytes for a body of %d", grew, len(body))
	}
	body[len(body)-3] = 'x' // the last id, past the cut
	if _, err := parseEmbeddingInput(body, 512); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Errorf("a bad id past the cut: %v", err)
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
	keys, err := newKeyring([][]byte{[]byte("k1"), []byte("k2")}, "", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for header, want := range map[string]bool{"Bearer k1": true, "bearer k2": true, "Bearer k3": false, "k1": false, "": false, "Bearer ": false, "Bearer k1 ": false, "Basic k1": false} {
		if got := keys.allows(bearer(header)); got != want {
			t.Errorf("%q: %v, want %v", header, got, want)
		}
	}
	if keys, err := newKeyring(nil, "", prometheus.NewRegistry()); keys != nil || err != nil {
		t.Errorf("a server without keys has a keyring: %v, %v", keys, err)
	}
}

// endless is a JSON body that goes on for n bytes: an input string that
// never closes. read counts what was taken (by the transport's goroutine,
// which may still be sending after the answer came).
type endless struct {
	n    int64
	read atomic.Int64
}

func (e *endless) Read(p []byte) (int, error) {
	at := e.read.Load()
	if at >= e.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), e.n-at)]
	const head = `{"model": "mlp", "input": ["`
	k := 0
	if at < int64(len(head)) {
		k = copy(p, head[at:])
	}
	for i := k; i < len(p); i++ {
		p[i] = 'x'
	}
	e.read.Add(int64(len(p)))
	return len(p), nil
}

// A 500 MB body to /v1/embeddings, sent without a declared length, is
// answered 413 in OpenAI's error shape once it passes the server's bound
// (64 MiB by default), which is all of it the server reads; the server
// answers on.
func TestHugeEmbeddingsBody(t *testing.T) {
	r := serveTest(t, []ModelSpec{mlpSpec(t, testMLP(t))})
	body := &endless{n: 500 << 20}
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/embeddings", io.NopCloser(body))
	req.ContentLength = -1 // chunked: the bound is found by reading
	resp, err := r.http.Do(req)
	if err != nil {
		t.Fatalf("a 500 MB body: %v (want a 413 answer)", err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var shape struct {
		Error struct{ Message, Type string } `json:"error"`
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(raw, &shape) != nil || shape.Error.Type != "invalid_request_error" || !strings.Contains(shape.Error.Message, "over") {
		t.Fatalf("a 500 MB body: %d %.300s", resp.StatusCode, raw)
	}
	if sent := body.read.Load(); sent > 200<<20 {
		t.Errorf("the client sent %d MiB of a 500 MB body before its answer", sent>>20)
	}
	if st, b := r.do(t, http.MethodGet, "/v1/models", nil, nil); st != http.StatusOK {
		t.Fatalf("after a 500 MB body: /v1/models %d %s", st, b)
	}
}
