package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
)

// A text much longer than its truncation keeps is tokenized from a head
// of it: the Rust tokenizers' early exit (tokenize_with_limit) stops
// after the split that reaches the limit, so when every step before the
// model ends its pieces at some point of the text, the tokens of the
// head cut there are those of the whole text. The point used is a plain
// space: one U+0020 between two ASCII letters or digits. Heads grow
// fourfold until one holds the limit, so a text costs the memory of the
// head its truncation needs, not of its length.

// headSizeTokens is the first head's size in bytes a token of the limit:
// most text takes 3–6 bytes a token.
const headSizeTokens = 8

// heads reports whether the tokenizer's steps end their pieces at a
// plain space, leaving all before it as the whole text has it:
//
//   - no added token holds white space (it could match across the
//     space) or takes the white space after it (rstrip);
//   - each normalizer maps one character at a time, or one grapheme
//     (Precompiled), or a starter-bounded run (the Unicode forms), or
//     is a Replace whose pattern cannot reach the space's neighbours;
//     together they map a plain space to one character that is not an
//     ASCII letter or digit, and the letters and digits to letters
//     and digits;
//   - the first pre-tokenizer splits at that character: white space for
//     the BERT and Whitespace ones, a space for GPT-2's, Llama 3's and
//     Qwen's patterns, the Metaspace replacement for a Metaspace that
//     splits, a character split's class.
//
// The models then tokenize each piece on its own. Anything else (a
// Metaspace that does not split, a pattern of its own, no pre-tokenizer)
// is tokenized whole.
func (t *Tokenizer) heads() bool {
	if !localAtSpace(t.normalizer) {
		return false
	}
	image, ok := t.spaceImage()
	if !ok || !splitsAt(t.pre, image) {
		return false
	}
	for _, a := range t.added.byID {
		if a.RStrip || strings.ContainsFunc(a.Content, func(r rune) bool { return r == image || unicode.IsSpace(r) }) {
			return false
		}
	}
	return true
}

// localAtSpace reports whether a normalizer leaves what comes before a
// plain space as it leaves the text cut there.
func localAtSpace(m normalizer) bool {
	switch m := m.(type) {
	case nil, *bertNormalizer, unicodeForm, lowercase, stripAccents, strip, prepend, byteLevelNormalizer, *precompiled:
		return true
	case sequenceNormalizer:
		for _, n := range m {
			if !localAtSpace(n) {
				return false
			}
		}
		return true
	case *replaceNormalizer:
		switch p := m.re.(type) {
		case literal:
			// A match touching the space but not the letters around it
			// is the space alone (what it becomes, spaceImage checks).
			return len(p) > 0 && !strings.ContainsFunc(string(p), isASCIIAlnum)
		case *regex:
			// XLM-R's: runs of two spaces or more.
			return p.re.String() == ` {2,}`
		}
	}
	return false
}

// alnums are the ASCII letters and digits, a space between each two.
const alnums = "0 1 2 3 4 5 6 7 8 9 a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P Q R S T U V W X Y Z"

// spaceImage is what the normalizer makes of a plain space, seen in
// alnums: one character, the same each time, not a letter or a digit,
// the letters and digits still letters and digits.
func (t *Tokenizer) spaceImage() (rune, bool) {
	in := []rune(alnums)
	n := newNormalized([]rune(alnums), 0)
	if t.normalizer != nil {
		if t.normalizer.normalize(n); n.err != nil {
			return 0, false
		}
	}
	// A Prepend puts its text first: only the tail is alnums' image.
	if len(n.runes) < len(in) {
		return 0, false
	}
	out := n.runes[len(n.runes)-len(in):]
	image := out[1]
	for i, r := range out {
		if i%2 == 0 && !isASCIIAlnum(r) || i%2 == 1 && r != image {
			return 0, false
		}
	}
	return image, !isASCIIAlnum(image)
}

// splitsAt reports whether a pre-tokenizer (the first of a Sequence)
// ends a piece before image between ASCII letters and digits, keeping
// the pieces before it whether or not the text goes on.
func splitsAt(p preTokenizer, image rune) bool {
	switch p := p.(type) {
	case bertPreTokenizer:
		return unicode.Is(unicode.White_Space, image)
	case whitespacePre:
		return isSpace(image)
	case charSplit:
		if !p.is(image) || strings.ContainsFunc(alnums, func(r rune) bool { return r != ' ' && p.is(r) }) {
			return false
		}
		// Merged with the piece before, the space would end it.
		return p.behavior != mergedWithPrevious
	case *byteLevel:
		return p.UseRegex && image == ' '
	case *metaspace:
		return p.Split && (image == ' ' || image == p.rep)
	case *splitPre:
		switch p.re.(type) {
		case gpt2, cl100k:
			return image == ' ' && !p.Invert && p.Behavior == isolated
		}
	case sequencePre:
		return len(p) > 0 && splitsAt(p[0], image)
	}
	return false
}

func isASCIIAlnum(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

// plainSpaceBefore is the last plain space of text at or before byte
// at, or -1.
func plainSpaceBefore(text string, at int) int {
	for i := min(at, len(text)-2); i > 0; i-- {
		if text[i] == ' ' && isASCIIAlnum(rune(text[i-1])) && isASCIIAlnum(rune(text[i+1])) {
			return i
		}
	}
	return -1
}

// headTokens is tokens(text, limit) reading at most maxBytes of text
// (none: 0 or less). From the right end, with a limit and a tokenizer
// whose steps allow it (heads), it reads heads cut at a plain space
// until one holds the limit; a text that needs more than maxBytes read
// is ErrTextTooLong.
func (t *Tokenizer) headTokens(text string, limit, maxBytes int) ([]token, error) {
	left := t.truncation != nil && t.truncation.Direction == "Left"
	if t.cutHeads && limit >= 0 && !left {
		for size := max(256, headSizeTokens*limit); size < len(text); size *= 4 {
			if maxBytes > 0 && size > maxBytes {
				size = maxBytes
			}
			if cut := plainSpaceBefore(text, size); cut > 0 {
				toks, err := t.tokens(text[:cut], limit)
				if err != nil || len(toks) >= limit {
					return toks, err
				}
			}
			if maxBytes > 0 && size >= maxBytes {
				return nil, fmt.Errorf("%w: %d bytes, and its first %d hold fewer than the %d tokens kept (the ceiling is %d bytes)", ErrTextTooLong, len(text), size, limit, maxBytes)
			}
		}
	}
	if maxBytes > 0 && len(text) > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, the ceiling is %d", ErrTextTooLong, len(text), maxBytes)
	}
	return t.tokens(text, limit)
}
