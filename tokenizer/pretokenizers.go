package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

func newPreTokenizer(t *typed) (preTokenizer, error) {
	switch t.Type {
	case "Metaspace":
		m := &metaspace{Replacement: "▁", Split: true}
		if err := decodeInto(t, "pre_tokenizer", m); err != nil {
			return nil, err
		}
		if m.PrependScheme == "" {
			// Older files say add_prefix_space instead.
			m.PrependScheme = "always"
			if m.AddPrefixSpace != nil && !*m.AddPrefixSpace {
				m.PrependScheme = "never"
			}
		}
		return m, m.init()
	case "BertPreTokenizer":
		return bertPreTokenizer{}, nil
	case "ByteLevel":
		p := &byteLevel{UseRegex: true}
		return p, decodeInto(t, "pre_tokenizer", p)
	case "Split":
		s := &splitPre{}
		if err := decodeInto(t, "pre_tokenizer", s); err != nil {
			return nil, err
		}
		return s, s.init()
	case "Sequence":
		seq, err := sequenceOf(t, "pre_tokenizer", "pretokenizers", newPreTokenizer)
		return sequencePre(seq), err
	case "Whitespace":
		return whitespacePre{}, nil
	case "UnicodeScripts":
		return unicodeScripts{}, nil
	case "WhitespaceSplit":
		return charSplit{isSpace, removed}, nil
	case "Punctuation":
		var doc struct {
			Behavior behavior `json:"behavior"`
		}
		doc.Behavior = isolated
		if err := decodeInto(t, "pre_tokenizer", &doc); err != nil {
			return nil, err
		}
		return charSplit{isBertPunctuation, doc.Behavior}, doc.Behavior.check()
	case "Digits":
		var doc struct {
			Individual bool `json:"individual_digits"`
		}
		if err := decodeInto(t, "pre_tokenizer", &doc); err != nil {
			return nil, err
		}
		if doc.Individual {
			return charSplit{isNumeric, isolated}, nil
		}
		return charSplit{isNumeric, contiguous}, nil
	case "CharDelimiterSplit":
		var doc struct {
			Delimiter string `json:"delimiter"`
		}
		if err := decodeInto(t, "pre_tokenizer", &doc); err != nil {
			return nil, err
		}
		d, size := utf8.DecodeRuneInString(doc.Delimiter)
		if size == 0 || size != len(doc.Delimiter) {
			return nil, fmt.Errorf("%w: CharDelimiterSplit delimiter %q is not one character", ErrFormat, doc.Delimiter)
		}
		return charSplit{func(r rune) bool { return r == d }, removed}, nil
	}
	return nil, fmt.Errorf("%w: pre_tokenizer %q (BertPreTokenizer, ByteLevel, Metaspace, Split, Whitespace, WhitespaceSplit, Punctuation, Digits, CharDelimiterSplit, UnicodeScripts and Sequence are)", ErrUnsupported, t.Type)
}

// wordLevel is the WordLevel model: a piece is its vocabulary entry, or
// unk_token.
type wordLevel struct {
	Vocab    map[string]int `json:"vocab"`
	UnkToken string         `json:"unk_token"`
	names    reverseVocab
}

func (w *wordLevel) vocabSize() int              { return len(w.Vocab) }
func (w *wordLevel) id(token string) (int, bool) { id, ok := w.Vocab[token]; return id, ok }
func (w *wordLevel) token(id int) (string, bool) { return w.names.get(w.Vocab, id) }
func (w *wordLevel) tokenize(word *normalized, out []token) ([]token, error) {
	s := string(word.runes)
	id, ok := w.Vocab[s]
	if !ok {
		if id, ok = w.Vocab[w.UnkToken]; !ok {
			return nil, fmt.Errorf("%w: WordLevel: %q is not in the vocabulary, and unk_token %q is not either", ErrEncode, s, w.UnkToken)
		}
		s = w.UnkToken
	}
	return append(out, token{id: id, value: s, offsets: word.span(0, len(word.runes))}), nil
}
