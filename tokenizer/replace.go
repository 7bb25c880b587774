package tokenizer

// replaceNormalizer is the Replace normalizer: each match of a string or
// a regular expression (an empty one too) replaced by content, whose
// characters take the alignment of the character before the match's end
// (Hugging Face's replace).
type replaceNormalizer struct {
	Pattern patternSpec `json:"pattern"`
	Content string      `json:"content"`
	re      pattern
}

func (r *replaceNormalizer) init() error {
	re, err := r.Pattern.compile("Replace")
	r.re = re
	return err
}

func (r *replaceNormalizer) normalize(n *normalized) {
	matches, err := r.re.find(n.runes)
	if err != nil {
		n.err = err
		return
	}
	if len(matches) == 0 {
		return
	}
	content := []rune(r.Content)
	var runes []rune
	var align [][2]int
	last := 0
	for _, m := range matches {
		start, end := m[0], m[1]
		runes = append(runes, n.runes[last:start]...)
		align = append(align, n.align[last:start]...)
		// The content takes the alignment of the character before the
		// match's end (an empty match at the start: the text's start).
		var at [2]int
		switch {
		case end > 0:
			at = n.align[end-1]
		case len(n.align) > 0:
			at = [2]int{n.align[0][0], n.align[0][0]}
		}
		for _, c := range content {
			runes = append(runes, c)
			align = append(align, at)
		}
		last = end
	}
	n.runes = append(runes, n.runes[last:]...)
	n.align = append(align, n.align[last:]...)
}
