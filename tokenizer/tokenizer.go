package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"unicode/utf8"
)

var (
	// ErrUnsupported reports a tokenizer.json component this package does
	// not implement: loading fails rather than tokenize differently.
	ErrUnsupported = errors.New("tokenizer: not supported")
	// ErrFormat reports a tokenizer.json that does not parse.
	ErrFormat = errors.New("tokenizer: bad tokenizer.json")
	// ErrEncode reports a text the tokenizer cannot encode as the Rust
	// tokenizers would (they fail on it too).
	ErrEncode = errors.New("tokenizer: cannot encode")
	// ErrTextTooLong reports a row's text past the bytes a caller allows
	// (WithMaxTextBytes).
	ErrTextTooLong = errors.New("tokenizer: text too long")
)

// Tokenizer encodes text as a tokenizer.json says. It is safe for
// concurrent use.
type Tokenizer struct {
	added      *addedVocab
	normalizer normalizer
	pre        preTokenizer // nil: the text is one piece
	model      model
	modelType  string // "WordPiece", "BPE", …
	post       postProcessor
	decoder    decoder
	truncation *Truncation
	cutHeads   bool // a long text may be read from its head (heads)
}

// normalizer normalizes text in place, keeping its alignments.
type normalizer interface {
	normalize(n *normalized)
}

// preTokenizer splits normalized text into the pieces a model tokenizes.
type preTokenizer interface {
	split(n *normalized) ([]*normalized, error)
}

// model tokenizes one piece.
type model interface {
	tokenize(piece *normalized, out []token) ([]token, error)
	vocabSize() int
	id(token string) (int, bool)
	token(id int) (string, bool)
}

// postProcessor lays a sequence (or a pair) out with special tokens.
type postProcessor interface {
	added(pair bool) int
	process(seqs [][]token) [][]token
}

// Encoding is one encoded text (or pair).
type Encoding struct {
	IDs           []int64
	TypeIDs       []int64
	AttentionMask []int64
	// Offsets are each token's span of the input in characters (code
	// points); a pair's second text counts from 0 too. Special tokens
	// have (0, 0).
	Offsets [][2]int
	Tokens  []string
	// SpecialTokensMask is 1 for the tokens the post-processor added.
	SpecialTokensMask []int64
	// Truncated reports that the truncation cut tokens of the text (or
	// of the pair): it is longer than the tokenizer keeps.
	Truncated bool
}

// typed is a component of tokenizer.json: its type, and the rest.
type typed struct {
	Type string `json:"type"`
	raw  json.RawMessage
}

func (t *typed) UnmarshalJSON(b []byte) error {
	t.raw = append(json.RawMessage(nil), b...)
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	t.Type = head.Type
	return nil
}

// LoadFile reads a tokenizer.json file.
func LoadFile(path string) (*Tokenizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Load reads a tokenizer.json.
func Load(r io.Reader) (*Tokenizer, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	var doc struct {
		Truncation    *Truncation     `json:"truncation"`
		Padding       json.RawMessage `json:"padding"`
		AddedTokens   []addedToken    `json:"added_tokens"`
		Normalizer    *typed          `json:"normalizer"`
		PreTokenizer  *typed          `json:"pre_tokenizer"`
		Model         *typed          `json:"model"`
		PostProcessor *typed          `json:"post_processor"`
		Decoder       *typed          `json:"decoder"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if doc.Model == nil {
		return nil, fmt.Errorf("%w: no model", ErrFormat)
	}
	t := &Tokenizer{}
	// Padding is left to the runner (package seq pads each sub-batch).
	if t.normalizer, err = newNormalizer(doc.Normalizer); err != nil {
		return nil, err
	}
	if doc.PreTokenizer != nil {
		if t.pre, err = newPreTokenizer(doc.PreTokenizer); err != nil {
			return nil, err
		}
	}
	if t.model, err = newModel(doc.Model); err != nil {
		return nil, err
	}
	t.modelType = modelType(doc.Model)
	if doc.PostProcessor != nil {
		if t.post, err = newPostProcessor(doc.PostProcessor); err != nil {
			return nil, err
		}
	}
	if doc.Decoder != nil {
		if t.decoder, err = newDecoder(doc.Decoder); err != nil {
			return nil, err
		}
	}
	if t.added, err = newAddedVocab(doc.AddedTokens, t.model, t.normalizer); err != nil {
		return nil, err
	}
	if doc.Truncation != nil {
		if err := t.SetTruncation(doc.Truncation); err != nil {
			return nil, err
		}
	}
	t.cutHeads = t.heads()
	return t, nil
}

// maxNesting is how deeply the JSON of a tokenizer.json may nest, as
// serde_json's recursion limit in the Rust tokenizers.
const maxNesting = 128

// checkJSON refuses what the Rust tokenizers refuse before reading
// components: anything but one JSON object, and nesting past their
// limit (which also bounds the cost of nested Sequences here).
func checkJSON(data []byte) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("%w: not UTF-8", ErrFormat)
	}
	depth, inString := 0, false
	end := -1
	for i := 0; i < len(data) && end < 0; i++ {
		c := data[i]
		switch {
		case inString && c == '\\':
			i++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > maxNesting {
				return fmt.Errorf("%w: nested over %d levels deep at byte %d", ErrFormat, maxNesting, i)
			}
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				end = i + 1
			}
		}
	}
	first := bytes.TrimLeft(data, " \t\r\n")
	if len(first) == 0 || first[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrFormat)
	}
	if end > 0 && len(bytes.TrimSpace(data[end:])) > 0 {
		return fmt.Errorf("%w: data after the JSON object, at byte %d", ErrFormat, end)
	}
	return nil
}

// checkIDs refuses a vocabulary's ids that are not u32s, as the Rust
// tokenizers read them (an id column is int32: 2^40 would wrap).
func checkIDs(vocab map[string]int, what string) error {
	for tok, id := range vocab {
		if id < 0 || id > math.MaxInt32 {
			return fmt.Errorf("%w: %s: the id of %q, %d, is past the ids a column holds (0 to 2^31-1)", ErrFormat, what, tok, id)
		}
	}
	return nil
}

// typeName is a component's type, or "none".
func typeName(t *typed) string {
	if t == nil {
		return "none"
	}
	return t.Type
}

// Model names the tokenizer's model, as tokenizer.json's types do
// (WordPiece, BPE, WordLevel or Unigram), and the size of its vocabulary.
func (t *Tokenizer) Model() (kind string, vocab int) { return t.modelType, t.model.vocabSize() }

// modelType is the model's type: its "type", or for a file without one
// (as the Rust tokenizers wrote before they wrote it) the first that the
// crate's untagged reading accepts, in its order (ModelUntagged in
// tokenizers/src/models/mod.rs): BPE (a vocab object and merges), then
// WordPiece (a vocab object, unk_token, continuing_subword_prefix and
// max_input_chars_per_word), then WordLevel (a vocab object and
// unk_token), else Unigram (whose vocab is a list).
func modelType(t *typed) string {
	if t == nil || t.Type != "" {
		return typeName(t)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(t.raw, &fields) != nil {
		return ""
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := fields[k]; !ok {
				return false
			}
		}
		return true
	}
	vocab := bytes.TrimSpace(fields["vocab"])
	switch vocabObject := len(vocab) > 0 && vocab[0] == '{'; {
	case vocabObject && has("merges"):
		return "BPE"
	case vocabObject && has("unk_token", "continuing_subword_prefix", "max_input_chars_per_word"):
		return "WordPiece"
	case vocabObject && has("unk_token"):
		return "WordLevel"
	}
	return "Unigram"
}

func newModel(t *typed) (model, error) {
	switch modelType(t) {
	case "WordPiece":
		m := &wordPiece{MaxInputCharsPerWord: 100, ContinuingSubwordPrefix: "##", UnkToken: "[UNK]"}
		if err := json.Unmarshal(t.raw, m); err != nil {
			return nil, fmt.Errorf("%w: model: %w", ErrFormat, err)
		}
		if err := m.init(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		return m, nil
	case "BPE":
		m := &bpe{}
		if err := json.Unmarshal(t.raw, m); err != nil {
			return nil, fmt.Errorf("%w: model: %w", ErrFormat, err)
		}
		if err := m.init(); err != nil {
			return nil, err
		}
		return m, nil
	case "WordLevel":
		m := &wordLevel{}
		if err := json.Unmarshal(t.raw, m); err != nil {
			return nil, fmt.Errorf("%w: model: %w", ErrFormat, err)
		}
		return m, checkIDs(m.Vocab, "WordLevel")
	case "Unigram":
		m := &unigram{}
		if err := json.Unmarshal(t.raw, m); err != nil {
			return nil, fmt.Errorf("%w: model: %w", ErrFormat, err)
		}
		if err := m.init(); err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: model %q (WordPiece, WordLevel, BPE and Unigram are)", ErrUnsupported, modelType(t))
}
