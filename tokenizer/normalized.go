package tokenizer

// normalized is text being normalized: its runes, each with the span of
// input characters it came from, so a token's offsets can be told in the
// input's terms (Hugging Face's NormalizedString alignments).
type normalized struct {
	runes []rune
	align [][2]int // input character span of each rune
	err   error    // the first error a normalizer met (a pattern that did not finish)
}

// newNormalized reads s, whose first character is input character base.
func newNormalized(s []rune, base int) *normalized {
	n := &normalized{runes: append([]rune(nil), s...), align: make([][2]int, len(s))}
	for i := range s {
		n.align[i] = [2]int{base + i, base + i + 1}
	}
	return n
}

// transform replaces each rune by what f returns (none, itself, or
// several), each aligned to the rune it replaces.
func (n *normalized) transform(f func(r rune, out []rune) []rune) {
	runes := make([]rune, 0, len(n.runes))
	align := make([][2]int, 0, len(n.runes))
	var buf []rune
	for i, r := range n.runes {
		buf = f(r, buf[:0])
		for _, x := range buf {
			runes = append(runes, x)
			align = append(align, n.align[i])
		}
	}
	n.runes, n.align = runes, align
}

// span returns the input characters of runes [i, j).
func (n *normalized) span(i, j int) [2]int {
	if i >= j {
		return [2]int{n.align[i][0], n.align[i][0]}
	}
	return [2]int{n.align[i][0], n.align[j-1][1]}
}

// slice returns runes [i, j) as a normalized of their own.
func (n *normalized) slice(i, j int) *normalized {
	return &normalized{runes: n.runes[i:j:j], align: n.align[i:j:j]}
}
