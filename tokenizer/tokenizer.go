package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

var (
	// ErrUnsupported reports a tokenizer.json component this package does
	// not implement: loading fails rather than tokenize differently.
	ErrUnsupported = errors.New("tokenizer: not supported")
	// ErrFormat reports a tokenizer.json that does not parse.
	ErrFormat = errors.New("tokenizer: bad tokenizer.json")
)

// Tokenizer encodes text as a tokenizer.json says. It is safe for
// concurrent use.
type Tokenizer struct {
	added      []addedToken // longest first
	normalizer normalizer
	pre        preTokenizer
	model      model
	post       postProcessor
	truncation *Truncation
}

// normalizer normalizes text in place, keeping its alignments.
type normalizer interface {
	normalize(n *normalized)
}

// preTokenizer splits normalized text into the pieces a model tokenizes.
type preTokenizer interface {
	split(n *normalized) []*normalized
}

// model tokenizes one piece.
type model interface {
	tokenize(piece *normalized, out []token) []token
	vocabSize() int
}

// postProcessor lays a sequence (or a pair) out with special tokens.
type postProcessor interface {
	added(pair bool) int
	apply(a, b []token, pair bool) []token
}

// Truncation is a tokenizer.json's truncation.
type Truncation struct {
	MaxLength int    `json:"max_length"`
	Strategy  string `json:"strategy"`  // LongestFirst, OnlyFirst, OnlySecond
	Direction string `json:"direction"` // Right, Left
	Stride    int    `json:"stride"`
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
}

type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
	runes      []rune
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
	var doc struct {
		Truncation    *Truncation     `json:"truncation"`
		Padding       json.RawMessage `json:"padding"`
		AddedTokens   []addedToken    `json:"added_tokens"`
		Normalizer    *typed          `json:"normalizer"`
		PreTokenizer  *typed          `json:"pre_tokenizer"`
		Model         *typed          `json:"model"`
		PostProcessor *typed          `json:"post_processor"`
	}
	dec := json.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	t := &Tokenizer{truncation: doc.Truncation}
	if tr := t.truncation; tr != nil {
		if tr.Stride != 0 {
			return nil, fmt.Errorf("%w: truncation with a stride (overflowing tokens)", ErrUnsupported)
		}
		if !slices.Contains([]string{"", "LongestFirst", "OnlyFirst", "OnlySecond"}, tr.Strategy) || !slices.Contains([]string{"", "Right", "Left"}, tr.Direction) {
			return nil, fmt.Errorf("%w: truncation strategy %q, direction %q", ErrUnsupported, tr.Strategy, tr.Direction)
		}
	}
	// Padding is left to the runner (package seq pads each sub-batch).
	var err error
	if t.normalizer, err = newNormalizer(doc.Normalizer); err != nil {
		return nil, err
	}
	if t.pre, err = newPreTokenizer(doc.PreTokenizer); err != nil {
		return nil, err
	}
	if t.model, err = newModel(doc.Model); err != nil {
		return nil, err
	}
	if doc.PostProcessor != nil {
		if t.post, err = newPostProcessor(doc.PostProcessor); err != nil {
			return nil, err
		}
	}
	for _, a := range doc.AddedTokens {
		switch {
		case a.Normalized && !a.Special:
			return nil, fmt.Errorf("%w: added token %q matched after normalization", ErrUnsupported, a.Content)
		case a.SingleWord || a.LStrip || a.RStrip:
			return nil, fmt.Errorf("%w: added token %q with single_word, lstrip or rstrip", ErrUnsupported, a.Content)
		case a.Content == "":
			continue
		}
		a.runes = []rune(a.Content)
		t.added = append(t.added, a)
	}
	slices.SortStableFunc(t.added, func(a, b addedToken) int { return len(b.runes) - len(a.runes) })
	return t, nil
}

// Encode encodes one text.
func (t *Tokenizer) Encode(text string) Encoding {
	return t.encode(text, "", false)
}

// EncodePair encodes a pair of texts (a question and a passage).
func (t *Tokenizer) EncodePair(a, b string) Encoding {
	return t.encode(a, b, true)
}

func (t *Tokenizer) encode(a, b string, pair bool) Encoding {
	first := t.tokens(a)
	var second []token
	if pair {
		second = t.tokens(b)
	}
	if t.truncation != nil {
		first, second = t.truncate(first, second, pair)
	}
	var all []token
	if t.post != nil {
		all = t.post.apply(first, second, pair)
	} else {
		all = first
		for i := range second {
			second[i].typeID = 1
		}
		all = append(all, second...)
	}
	e := Encoding{}
	for _, tk := range all {
		e.IDs = append(e.IDs, int64(tk.id))
		e.TypeIDs = append(e.TypeIDs, int64(tk.typeID))
		e.AttentionMask = append(e.AttentionMask, 1)
		e.Offsets = append(e.Offsets, tk.offsets)
		e.Tokens = append(e.Tokens, tk.value)
		special := int64(0)
		if tk.special {
			special = 1
		}
		e.SpecialTokensMask = append(e.SpecialTokensMask, special)
	}
	return e
}

// tokens runs one text through added tokens, normalization,
// pre-tokenization and the model.
func (t *Tokenizer) tokens(text string) []token {
	runes := []rune(text) // each invalid byte is U+FFFD
	var out []token
	start := 0
	flush := func(end int) {
		if start >= end {
			return
		}
		n := newNormalized(runes[start:end], start)
		if t.normalizer != nil {
			t.normalizer.normalize(n)
		}
		for _, w := range t.pre.split(n) {
			out = t.model.tokenize(w, out)
		}
	}
	for i := 0; i < len(runes); {
		a, ok := t.addedAt(runes, i)
		if !ok {
			i++
			continue
		}
		flush(i)
		out = append(out, token{id: a.ID, value: a.Content, offsets: [2]int{i, i + len(a.runes)}})
		i += len(a.runes)
		start = i
	}
	flush(len(runes))
	return out
}

// addedAt returns the longest added token at runes[i:], if one is there.
func (t *Tokenizer) addedAt(runes []rune, i int) (addedToken, bool) {
	for _, a := range t.added {
		if len(a.runes) <= len(runes)-i && slices.Equal(runes[i:i+len(a.runes)], a.runes) {
			return a, true
		}
	}
	return addedToken{}, false
}

// typeName is a component's type, or "none".
func typeName(t *typed) string {
	if t == nil {
		return "none"
	}
	return t.Type
}

func newNormalizer(t *typed) (normalizer, error) {
	switch typeName(t) {
	case "none":
		return nil, nil
	case "BertNormalizer":
		b := &bertNormalizer{}
		if err := json.Unmarshal(t.raw, b); err != nil {
			return nil, fmt.Errorf("%w: normalizer: %w", ErrFormat, err)
		}
		return b, nil
	case "NFKC":
		return nfkc{}, nil
	case "Sequence":
		return newSequence(t.raw)
	case "Replace":
		r := &replaceNormalizer{}
		if err := json.Unmarshal(t.raw, r); err != nil {
			return nil, fmt.Errorf("%w: normalizer: %w", ErrFormat, err)
		}
		if err := r.init(); err != nil {
			return nil, err
		}
		return r, nil
	case "Precompiled":
		p := &precompiled{}
		if err := json.Unmarshal(t.raw, p); err != nil {
			return nil, fmt.Errorf("%w: normalizer: %w", ErrFormat, err)
		}
		if err := p.init(); err != nil {
			return nil, err
		}
		return p, nil
	}
	return nil, fmt.Errorf("%w: normalizer %q (BertNormalizer, NFKC, Precompiled, Replace and Sequence are)", ErrUnsupported, typeName(t))
}

func newPreTokenizer(t *typed) (preTokenizer, error) {
	switch typeName(t) {
	case "Metaspace":
		m := &metaspace{Replacement: "▁", Split: true}
		if err := json.Unmarshal(t.raw, m); err != nil {
			return nil, fmt.Errorf("%w: pre_tokenizer: %w", ErrFormat, err)
		}
		if m.PrependScheme == "" {
			// Older files say add_prefix_space instead.
			m.PrependScheme = "always"
			if m.AddPrefixSpace != nil && !*m.AddPrefixSpace {
				m.PrependScheme = "never"
			}
		}
		if err := m.init(); err != nil {
			return nil, err
		}
		return m, nil
	case "BertPreTokenizer":
		return bertPreTokenizer{}, nil
	case "ByteLevel":
		p := &byteLevel{UseRegex: true}
		if err := json.Unmarshal(t.raw, p); err != nil {
			return nil, fmt.Errorf("%w: pre_tokenizer: %w", ErrFormat, err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("%w: pre_tokenizer %q (BertPreTokenizer, ByteLevel and Metaspace are)", ErrUnsupported, typeName(t))
}

func newModel(t *typed) (model, error) {
	switch typeName(t) {
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
	return nil, fmt.Errorf("%w: model %q (WordPiece, BPE and Unigram are)", ErrUnsupported, typeName(t))
}
