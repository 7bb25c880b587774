package tokenizer

import (
	"sort"
	"unicode"

	"github.com/drainpipe/drainpipe/tokenizer/internal/uniprops"
)

// bertNormalizer is Hugging Face's BertNormalizer.
type bertNormalizer struct {
	CleanText          bool  `json:"clean_text"`
	HandleChineseChars bool  `json:"handle_chinese_chars"`
	StripAccents       *bool `json:"strip_accents"`
	Lowercase          bool  `json:"lowercase"`
}

func (b *bertNormalizer) normalize(n *normalized) {
	if b.CleanText {
		n.transform(func(r rune, out []rune) []rune {
			switch {
			case r == 0 || r == 0xfffd || isControl(r):
				return out
			case isBertWhitespace(r):
				return append(out, ' ')
			}
			return append(out, r)
		})
	}
	if b.HandleChineseChars {
		n.transform(func(r rune, out []rune) []rune {
			if isChinese(r) {
				return append(out, ' ', r, ' ')
			}
			return append(out, r)
		})
	}
	strip := b.Lowercase
	if b.StripAccents != nil {
		strip = *b.StripAccents
	}
	if strip {
		unicodeForm{}.normalize(n)
		n.transform(func(r rune, out []rune) []rune {
			if unicode.Is(uniprops.Nonspacing8, r) {
				return out
			}
			return append(out, r)
		})
	}
	if b.Lowercase {
		n.transform(lower)
	}
}

// lower is Rust's char::to_lowercase: the simple mapping, and the one
// unconditional mapping to more than one character (İ → i̇).
func lower(r rune, out []rune) []rune {
	switch {
	case r == 'İ':
		return append(out, 'i', '\u0307')
	case r < 0x80:
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		return append(out, r)
	}
	i := sort.Search(len(uniprops.Lower17), func(i int) bool { return uniprops.Lower17[i][0] >= r })
	if i < len(uniprops.Lower17) && uniprops.Lower17[i][0] == r {
		r = uniprops.Lower17[i][1]
	}
	return append(out, r)
}

// isBertWhitespace is tab, newline, carriage return and Unicode white
// space.
func isBertWhitespace(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || unicode.Is(unicode.White_Space, r)
}

// isControl is the categories Cc, Cf and Co, less tab, newline and
// carriage return. (The Rust normalizer means Cn too, but the table it
// reads has no unassigned code points: they are kept, as there.)
func isControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Co) || unicode.Is(uniprops.Format8, r)
}

// isChinese is the CJK Unified Ideographs blocks the BERT normalizer
// pads with spaces.
func isChinese(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2B73F, r >= 0x2B740 && r <= 0x2B81F, r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

// isBertPunctuation is ASCII punctuation (symbols such as $ and + among
// it) and the Unicode punctuation categories (as of Unicode 8.0).
func isBertPunctuation(r rune) bool {
	if r < 0x80 {
		return r >= '!' && r <= '/' || r >= ':' && r <= '@' || r >= '[' && r <= '`' || r >= '{' && r <= '~'
	}
	return unicode.Is(uniprops.Punctuation8, r)
}

// bertPreTokenizer splits normalized text into words: at white space,
// which is dropped, and around each punctuation character, which is a
// word of its own.
type bertPreTokenizer struct{}

func (bertPreTokenizer) split(n *normalized) ([]*normalized, error) {
	var words []*normalized
	start := 0
	for i, r := range n.runes {
		switch {
		case unicode.Is(unicode.White_Space, r):
			if start < i {
				words = append(words, n.slice(start, i))
			}
			start = i + 1
		case isBertPunctuation(r):
			if start < i {
				words = append(words, n.slice(start, i))
			}
			words = append(words, n.slice(i, i+1))
			start = i + 1
		}
	}
	if start < len(n.runes) {
		words = append(words, n.slice(start, len(n.runes)))
	}
	return words, nil
}
