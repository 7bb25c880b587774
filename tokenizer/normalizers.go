package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode"

	"github.com/drainpipe/drainpipe/tokenizer/internal/uniprops"
)

// lowercase is the Lowercase normalizer (Rust's char::to_lowercase).
type lowercase struct{}

func (lowercase) normalize(n *normalized) { n.transform(lower) }

// keep removes the characters keep refuses, each kept one keeping its
// alignment.
func (n *normalized) keep(keep func(i int, r rune) bool) {
	runes, align := n.runes[:0:0], n.align[:0:0]
	for i, r := range n.runes {
		if keep(i, r) {
			runes = append(runes, r)
			align = append(align, n.align[i])
		}
	}
	n.runes, n.align = runes, align
}

// strip is the Strip normalizer: white space removed from either end.
type strip struct {
	Left  bool `json:"strip_left"`
	Right bool `json:"strip_right"`
}

func (s strip) normalize(n *normalized) {
	lead, trail := 0, len(n.runes)
	if s.Left {
		for lead < len(n.runes) && isSpace(n.runes[lead]) {
			lead++
		}
	}
	if s.Right {
		for trail > lead && isSpace(n.runes[trail-1]) {
			trail--
		}
	}
	n.runes, n.align = n.runes[lead:trail], n.align[lead:trail]
}

// stripAccents is the StripAccents normalizer: combining marks removed
// (categories Mn, Mc and Me, as of Unicode 9.0: the normalization
// crate's is_combining_mark).
type stripAccents struct{}

func (stripAccents) normalize(n *normalized) {
	n.keep(func(_ int, r rune) bool { return !unicode.Is(uniprops.Mark9, r) })
}

// prepend is the Prepend normalizer: a string put before a text that is
// not empty, aligned to its first character.
type prepend struct {
	Prepend string `json:"prepend"`
}

func (p prepend) normalize(n *normalized) {
	if len(n.runes) == 0 || p.Prepend == "" {
		return
	}
	add := []rune(p.Prepend)
	runes := append(add, n.runes...)
	align := make([][2]int, 0, len(runes))
	for range add {
		align = append(align, n.align[0])
	}
	n.runes, n.align = runes, append(align, n.align...)
}

// byteLevelNormalizer is the ByteLevel normalizer: each character's
// UTF-8 bytes written as the byte-level alphabet's characters.
type byteLevelNormalizer struct{}

func (byteLevelNormalizer) normalize(n *normalized) {
	b, _ := toBytes(n)
	n.runes, n.align = b.runes, b.align
}

// sequenceNormalizer applies normalizers in order.
type sequenceNormalizer []normalizer

func (s sequenceNormalizer) normalize(n *normalized) {
	for _, m := range s {
		m.normalize(n)
	}
}

// sequenceOf reads the components of a Sequence (its JSON field key),
// each made by build.
func sequenceOf[T any](t *typed, what, key string, build func(*typed) (T, error)) ([]T, error) {
	var doc map[string]json.RawMessage
	if err := decodeInto(t, what, &doc); err != nil {
		return nil, err
	}
	var items []*typed
	if err := json.Unmarshal(doc[key], &items); err != nil {
		return nil, fmt.Errorf("%w: %s Sequence's %s: %w", ErrFormat, what, key, err)
	}
	out := make([]T, 0, len(items))
	for i, it := range items {
		if it == nil {
			return nil, fmt.Errorf("%w: %s Sequence item %d is null", ErrFormat, what, i)
		}
		c, err := build(it)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// decodeInto reads a component's JSON into v.
func decodeInto(t *typed, what string, v any) error {
	if err := json.Unmarshal(t.raw, v); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrFormat, what, t.Type, err)
	}
	return nil
}

func newNormalizer(t *typed) (normalizer, error) {
	var (
		m   normalizer
		err error
	)
	switch typeName(t) {
	case "none":
		return nil, nil
	case "BertNormalizer":
		b := &bertNormalizer{}
		err, m = decodeInto(t, "normalizer", b), b
	case "NFC":
		m = unicodeForm{compose: true}
	case "NFD":
		m = unicodeForm{}
	case "NFKC":
		m = unicodeForm{compat: true, compose: true}
	case "NFKD":
		m = unicodeForm{compat: true}
	case "Lowercase":
		m = lowercase{}
	case "StripAccents":
		m = stripAccents{}
	case "Strip":
		s := strip{}
		err, m = decodeInto(t, "normalizer", &s), s
	case "Prepend":
		p := prepend{}
		err, m = decodeInto(t, "normalizer", &p), p
	case "ByteLevel":
		m = byteLevelNormalizer{}
	case "Sequence":
		seq, err := sequenceOf(t, "normalizer", "normalizers", newNormalizer)
		var out sequenceNormalizer
		for _, m := range seq {
			if m != nil {
				out = append(out, m)
			}
		}
		return out, err
	case "Replace":
		r := &replaceNormalizer{}
		if err := decodeInto(t, "normalizer", r); err != nil {
			return nil, err
		}
		return r, r.init()
	case "Precompiled":
		p := &precompiled{}
		if err := decodeInto(t, "normalizer", p); err != nil {
			return nil, err
		}
		return p, p.init()
	default:
		return nil, fmt.Errorf("%w: normalizer %q (BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, ByteLevel, Replace, Precompiled and Sequence are)", ErrUnsupported, typeName(t))
	}
	return m, err
}
