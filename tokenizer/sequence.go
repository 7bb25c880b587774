package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// sequenceNormalizer applies normalizers in order.
type sequenceNormalizer []normalizer

func (s sequenceNormalizer) normalize(n *normalized) {
	for _, m := range s {
		m.normalize(n)
	}
}

// replaceNormalizer is the Replace normalizer: each match of a string or
// a regular expression replaced by content, whose characters take the
// alignment of the match's last character (Hugging Face's replace).
type replaceNormalizer struct {
	Pattern struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	} `json:"pattern"`
	Content string `json:"content"`
	re      *regexp.Regexp
}

func (r *replaceNormalizer) init() error {
	switch {
	case r.Pattern.String != nil:
		r.re = regexp.MustCompile(regexp.QuoteMeta(*r.Pattern.String))
	case r.Pattern.Regex != nil:
		// Oniguruma's syntax in the Rust package; Go's RE2 agrees on the
		// patterns tokenizers use (" {2,}"), and refuses the rest.
		re, err := regexp.Compile(*r.Pattern.Regex)
		if err != nil {
			return fmt.Errorf("%w: Replace pattern %q: %w", ErrUnsupported, *r.Pattern.Regex, err)
		}
		r.re = re
	default:
		return fmt.Errorf("%w: Replace without a pattern", ErrFormat)
	}
	return nil
}

func (r *replaceNormalizer) normalize(n *normalized) {
	text := string(n.runes)
	matches := r.re.FindAllStringIndex(text, -1)
	if len(matches) == 0 {
		return
	}
	// Byte offsets of the text to rune indices.
	runeAt := make([]int, len(text)+1)
	k := 0
	for i := range text {
		runeAt[i] = k
		k++
	}
	runeAt[len(text)] = k
	content := []rune(r.Content)
	var runes []rune
	var align [][2]int
	last := 0
	for _, m := range matches {
		start, end := runeAt[m[0]], runeAt[m[1]]
		if start == end {
			continue // an empty match replaces nothing here
		}
		runes = append(runes, n.runes[last:start]...)
		align = append(align, n.align[last:start]...)
		for _, c := range content {
			runes = append(runes, c)
			align = append(align, n.align[end-1])
		}
		last = end
	}
	n.runes = append(runes, n.runes[last:]...)
	n.align = append(align, n.align[last:]...)
}

// newSequence reads a Sequence normalizer's normalizers.
func newSequence(raw json.RawMessage) (normalizer, error) {
	var doc struct {
		Normalizers []*typed `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%w: normalizer: %w", ErrFormat, err)
	}
	var seq sequenceNormalizer
	for _, t := range doc.Normalizers {
		m, err := newNormalizer(t)
		if err != nil {
			return nil, err
		}
		if m != nil {
			seq = append(seq, m)
		}
	}
	return seq, nil
}
