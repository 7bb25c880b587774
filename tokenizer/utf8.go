package tokenizer

import "unicode/utf8"

// lossyRunes reads s as Rust's String::from_utf8_lossy (and node's
// Buffer, and the WHATWG decoder) read bytes: valid UTF-8 as its
// characters, each maximal invalid subpart — a lead byte and the
// continuation bytes it allows, cut short, or one stray byte — as one
// U+FFFD.
func lossyRunes(s string) []rune {
	if utf8.ValidString(s) {
		return []rune(s)
	}
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size > 1 {
			out = append(out, r)
			i += size
			continue
		}
		out = append(out, utf8.RuneError)
		i += invalidSubpart(s[i:])
	}
	return out
}

// invalidSubpart is the length of the maximal subpart of an ill-formed
// sequence at the start of s (Unicode's table of well-formed byte
// sequences): at least 1.
func invalidSubpart(s string) int {
	lo, hi, need := byte(0x80), byte(0xBF), 0
	switch c := s[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		lo, need = 0xA0, 2
	case c == 0xED:
		hi, need = 0x9F, 2
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		lo, need = 0x90, 3
	case c == 0xF4:
		hi, need = 0x8F, 3
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	}
	n := 1
	for k := 0; k < need && n < len(s) && s[n] >= lo && s[n] <= hi; k++ {
		n++
		lo, hi = 0x80, 0xBF
	}
	return n
}
