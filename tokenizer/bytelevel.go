package tokenizer

import (
	"unicode"
	"unicode/utf8"

	"github.com/drainpipe/drainpipe/tokenizer/internal/uniprops"
)

// byteLevel is Hugging Face's ByteLevel pre-tokenizer (GPT-2's): the
// text split by GPT-2's pattern, each piece's UTF-8 bytes written as the
// printable characters of bytesChar.
type byteLevel struct {
	AddPrefixSpace bool `json:"add_prefix_space"`
	TrimOffsets    bool `json:"trim_offsets"`
	UseRegex       bool `json:"use_regex"`
}

// bytesChar maps each byte to the character byte-level vocabularies
// write it as: printable Latin-1 bytes as themselves, the others from
// U+0100 on, in byte order.
var bytesChar = func() [256]rune {
	var t [256]rune
	n := rune(0)
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// spaceChar is the character a space byte is written as (Ġ).
var spaceChar = bytesChar[' ']

func (p *byteLevel) split(n *normalized) ([]*normalized, error) {
	if p.AddPrefixSpace && len(n.runes) > 0 && n.runes[0] != ' ' {
		// Hugging Face's prepend: the space takes the first character's
		// alignment.
		n.runes = append([]rune{' '}, n.runes...)
		n.align = append([][2]int{n.align[0]}, n.align...)
	}
	if len(n.runes) == 0 {
		return nil, nil
	}
	// The whole text to bytes at once; the pieces are slices of it.
	b, at := toBytes(n)
	if !p.UseRegex {
		return []*normalized{b}, nil
	}
	var pieces []*normalized
	for i := 0; i < len(n.runes); {
		end := gpt2Match(n.runes, i)
		pieces = append(pieces, b.slice(at[i], at[end]))
		i = end
	}
	return pieces, nil
}

// toBytes writes a text's characters as their bytes' characters, each
// aligned to the character it is a byte of; at[i] is where character i's
// bytes start (at[len] the end).
func toBytes(n *normalized) (out *normalized, at []int) {
	size := 0
	for _, r := range n.runes {
		if l := utf8.RuneLen(r); l > 0 {
			size += l
		} else {
			size += 3 // written as U+FFFD
		}
	}
	out = &normalized{runes: make([]rune, 0, size), align: make([][2]int, 0, size)}
	at = make([]int, 0, len(n.runes)+1)
	var buf [utf8.UTFMax]byte
	for i, r := range n.runes {
		at = append(at, len(out.runes))
		for _, b := range buf[:utf8.EncodeRune(buf[:], r)] {
			out.runes = append(out.runes, bytesChar[b])
			out.align = append(out.align, n.align[i])
		}
	}
	return out, append(at, len(out.runes))
}

func isSpace(r rune) bool { return unicode.Is(unicode.White_Space, r) }

// isL and isN are Oniguruma's \p{L} and \p{N}, of Unicode 16.0.
func isL(r rune) bool {
	return r < 0x80 && (r|0x20 >= 'a' && r|0x20 <= 'z') || r >= 0x80 && unicode.Is(uniprops.Letter16, r)
}
func isN(r rune) bool { return r >= '0' && r <= '9' || r >= 0x80 && unicode.Is(uniprops.Number16, r) }

// gpt2Match returns the end of GPT-2's pattern's match at i,
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// its alternatives tried in order, as a backtracking engine does (Go's
// regexp has no lookahead).
func gpt2Match(r []rune, i int) int {
	n := len(r)
	if end := contraction(r, i, false); end > 0 {
		return end
	}
	for _, class := range []func(rune) bool{isL, isN, func(c rune) bool { return !isSpace(c) && !isL(c) && !isN(c) }} {
		j := i
		if r[j] == ' ' {
			j++
		}
		if j < n && class(r[j]) {
			for j < n && class(r[j]) {
				j++
			}
			return j
		}
	}
	// r[i] is white space here.
	return spaceMatch(r, i, spaceRun(r, i))
}

// contraction returns the end of 's|'t|'re|'ve|'m|'ll|'d at r[i] (any
// case, with fold), or 0.
func contraction(r []rune, i int, fold bool) int {
	at := func(k int, c byte) bool {
		return k < len(r) && (r[k] == rune(c) || fold && r[k] == rune(c)-'a'+'A')
	}
	if r[i] == '\'' {
		switch {
		case at(i+1, 's'), at(i+1, 't'), at(i+1, 'm'), at(i+1, 'd'):
			return i + 2
		case at(i+1, 'r') && at(i+2, 'e'), at(i+1, 'v') && at(i+2, 'e'), at(i+1, 'l') && at(i+2, 'l'):
			return i + 3
		}
	}
	return 0
}

// spaceRun returns the end of the run of white space at r[i].
func spaceRun(r []rune, i int) int {
	for i < len(r) && isSpace(r[i]) {
		i++
	}
	return i
}

// spaceMatch is \s+(?!\S)|\s+ on the run of white space r[i:end]: the
// last space goes with what follows, unless it is the only one.
func spaceMatch(r []rune, i, end int) int {
	if end < len(r) && end-1 > i {
		return end - 1
	}
	return end
}

// trimOffsets is Hugging Face's process_offsets: a token's offsets leave
// out its leading and trailing spaces, except a first token's one added
// prefix space.
func trimOffsets(tokens []token, addPrefixSpace bool) {
	space := func(c rune) bool { return c == spaceChar || unicode.Is(unicode.White_Space, c) }
	for i := range tokens {
		t := &tokens[i]
		runes := []rune(t.value)
		lead, trail := 0, 0
		for lead < len(runes) && space(runes[lead]) {
			lead++
		}
		for trail < len(runes) && space(runes[len(runes)-1-trail]) {
			trail++
		}
		if lead > 0 {
			if (i == 0 || t.offsets[0] == 0) && addPrefixSpace && lead == 1 {
				lead = 0
			}
			t.offsets[0] = min(t.offsets[0]+lead, t.offsets[1])
		}
		if trail > 0 && t.offsets[1] >= trail {
			t.offsets[1] = max(t.offsets[1]-trail, t.offsets[0])
		}
	}
}
