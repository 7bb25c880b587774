package serve

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	// The GenAI attributes, which later versions keep apart.
	genai "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// MaxEmbeddingInputs bounds the inputs of one /v1/embeddings request, as
// OpenAI's API does (2,048).
const MaxEmbeddingInputs = 2048

// embeddingOutput is the output column /v1/embeddings answers with.
const embeddingOutput = "embedding"

// openAIRequest is POST /v1/embeddings' body, as OpenAI's clients send
// it; user is accepted and ignored.
type openAIRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// embeddingInputs are a request's inputs: texts, or arrays of token ids.
type embeddingInputs struct {
	texts  []string
	tokens [][]int64
}

func (in embeddingInputs) len() int { return len(in.texts) + len(in.tokens) }

// parseEmbeddingInput reads input as OpenAI takes it: a string, an
// array of strings, an array of token ids, or an array of those, keeping
// at most keep ids of a token array (what the model runs). An empty
// text is a text, as in a job (its special tokens alone); an empty array
// is refused.
// Nothing is decoded twice, and the inputs are counted before they are
// decoded: what a request allocates is bounded by its body's bytes and
// by inputs × keep ids, whatever the body holds.
func parseEmbeddingInput(raw json.RawMessage, keep int) (embeddingInputs, error) {
	var in embeddingInputs
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return in, errors.New("input is missing")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return in, fmt.Errorf("input: %w", err)
		}
		in.texts = []string{s}
		return in, nil
	case '[':
	default:
		return in, errors.New("input is not a string, an array of strings, an array of token ids or an array of those")
	}
	first := bytes.TrimLeft(raw[1:], " \t\r\n")
	switch {
	case len(first) == 0 || first[0] == ']':
		return in, errors.New("input is empty")
	case first[0] == '"':
		if n := countElements(raw); n > MaxEmbeddingInputs {
			return in, fmt.Errorf("input has %d texts; a request takes %d at most", n, MaxEmbeddingInputs)
		}
		if err := json.Unmarshal(raw, &in.texts); err != nil {
			return embeddingInputs{}, fmt.Errorf("input mixes kinds or holds something else: %w", err)
		}
		return in, nil
	}
	var err error
	in.tokens, err = parseTokenIDs(raw, keep)
	return in, err
}

// countElements counts the elements of the JSON array at b[0] without
// decoding them (to the end of b at most, for bytes that are not JSON).
func countElements(b []byte) int {
	return eachElement(b, func([]byte) bool { return true })
}

// eachElement calls fn with each element of the JSON array at b[0] (its
// bytes to its end), without decoding it, until fn returns false; it
// returns the elements seen.
func eachElement(b []byte, fn func(elem []byte) bool) int {
	n := 0
	for i := 1; i < len(b); {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' || b[i] == ',') {
			i++
		}
		if i >= len(b) || b[i] == ']' {
			break
		}
		end := skipValue(b, i)
		n++
		if !fn(b[i:end]) {
			break
		}
		i = max(end, i+1)
	}
	return n
}

// allStrings reports whether every element of the JSON array at b[0] is
// a string: checked before decoding, as encoding/json allocates an error
// for each element of the wrong kind, 80 times the bytes of a long array.
func allStrings(b []byte) bool {
	ok := true
	eachElement(b, func(e []byte) bool { ok = e[0] == '"'; return ok })
	return ok
}

// embedInputs embeds a request's inputs on m, a sequence model, one
// embedding an input, and counts the tokens it ran: texts through
// embedTexts (encoded once, a long one pooled from its windows where the
// model pools them), or token arrays cut where the model cuts them (its
// planner's longest), so that a request holds at most rows × that many
// ids, whatever one long array in the body asks.
func (s *Server) embedInputs(ctx context.Context, m *model, in embeddingInputs) ([][]float32, int, error) {
	if in.texts != nil {
		return s.embedTexts(ctx, m, in.texts, false, false)
	}
	if m.input.NumFields() != 1 {
		return nil, 0, invalid(fmt.Errorf("model %s takes %s, not one token input", m.name, names(m.inputs)))
	}
	planner, tokens := m.sequence.Planner(), 0
	for i, row := range in.tokens {
		in.tokens[i] = row[:planner.Length(len(row))]
		tokens += len(in.tokens[i])
	}
	resp, err := s.infer(ctx, &inferRequest{model: m.name, version: m.version, outputs: []string{embeddingOutput},
		inputs: []*tensor{raggedTensor(m.input.Field(0).Name, in.tokens)}})
	if err != nil {
		return nil, 0, err
	}
	rows, err := floats(resp, embeddingOutput)
	return rows, tokens, err
}

// embeddingJSON is one embedding of the answer: a []float32, or its
// little-endian bytes in base64 (encoding_format base64).
type embeddingJSON struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// shorten cuts an embedding to its first d elements and scales it back
// to unit length, as OpenAI's dimensions and Matryoshka models do.
func shorten(v []float32, d int) []float32 {
	sum := 0.0
	for _, x := range v[:d] {
		sum += float64(x) * float64(x)
	}
	norm := math.Sqrt(sum)
	if norm == 0 {
		return v[:d]
	}
	out := make([]float32, d)
	for i, x := range v[:d] {
		out[i] = float32(float64(x) / norm)
	}
	return out
}

func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func (s *Server) openAIEmbeddings(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	name, status, err := s.embed(w, r)
	if err != nil {
		status = writeOpenAIError(w, err)
	}
	s.finish(r.Context(), "openai", name, strconv.Itoa(status), r.RemoteAddr, nil, nil, time.Since(began), err)
}

// embed answers a /v1/embeddings request; on error it writes nothing.
func (s *Server) embed(w http.ResponseWriter, r *http.Request) (model string, status int, err error) {
	body, err := s.readBody(w, r)
	if err != nil {
		return "", 0, err
	}
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return "", 0, invalid(fmt.Errorf("malformed JSON request: %w", err))
	}
	if req.Model == "" {
		return "", 0, invalid(errors.New("model is missing"))
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		return req.Model, 0, invalid(fmt.Errorf("encoding_format %q: want float or base64", req.EncodingFormat))
	}
	m, err := s.lookup(req.Model, "")
	if err != nil {
		return req.Model, 0, err
	}
	if m.sequence == nil {
		return req.Model, 0, invalid(fmt.Errorf("model %s is not a sequence model: embeddings are of text or token ids", m.name))
	}
	in, err := parseEmbeddingInput(req.Input, m.sequence.Planner().Length(math.MaxInt))
	if err != nil {
		return req.Model, 0, invalid(err)
	}
	rows, tokens, err := s.embedInputs(r.Context(), m, in)
	if err != nil {
		return req.Model, 0, err
	}
	width := len(rows[0])
	if d := req.Dimensions; d != nil && (*d < 1 || *d > width) {
		return req.Model, 0, invalid(fmt.Errorf("dimensions %d: model %s's embeddings have %d", *d, m.name, width))
	}
	data := make([]embeddingJSON, len(rows))
	for i := range data {
		v := rows[i]
		if req.Dimensions != nil && *req.Dimensions < width {
			v = shorten(v, *req.Dimensions)
		}
		data[i] = embeddingJSON{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			data[i].Embedding = base64Floats(v)
		}
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		dims := width
		if req.Dimensions != nil {
			dims = *req.Dimensions
		}
		span.SetAttributes(embeddingsSpan(m.name, tokens, dims, cmp.Or(req.EncodingFormat, "float"))...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": m.name,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
	return req.Model, http.StatusOK, nil
}

// embeddingsSpan are the attributes OpenTelemetry's GenAI conventions
// give an embeddings request's span: the usage the answer reports.
func embeddingsSpan(model string, tokens, dims int, format string) []attribute.KeyValue {
	return []attribute.KeyValue{genai.GenAIOperationNameEmbeddings, genai.GenAIRequestModel(model),
		genai.GenAIUsageInputTokens(tokens), genai.GenAIEmbeddingsDimensionCount(dims), genai.GenAIRequestEncodingFormats(format)}
}

// openAIModel is a model as GET /v1/models lists it.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) openAIModels(w http.ResponseWriter, r *http.Request) {
	if name := r.PathValue("model"); name != "" {
		if _, err := s.lookup(name, ""); err != nil {
			writeOpenAIError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, openAIModel{ID: name, Object: "model", OwnedBy: s.cfg.name})
		return
	}
	list := []openAIModel{}
	for _, name := range s.reg.names() {
		list = append(list, openAIModel{ID: name, Object: "model", OwnedBy: s.cfg.name})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list})
}

// writeOpenAIError answers an error in OpenAI's shape, with the status
// of its class.
func writeOpenAIError(w http.ResponseWriter, err error) int {
	retryAfter(w, err)
	code := codeOf(err)
	status := httpStatus[code]
	kind, name := "invalid_request_error", any(nil)
	switch code {
	case CodeNotFound:
		name = "model_not_found"
	case CodeUnauthenticated:
		name = "invalid_api_key"
	case CodeOverloaded:
		kind = "rate_limit_error"
	case CodeInternal, CodeUnavailable, CodeDeadline, CodeCanceled:
		kind = "server_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": err.Error(), "type": kind, "param": nil, "code": name}})
	return status
}
