package tokenizer

// replaceNormalizer is the Replace normalizer: each match of a string or
// a regular expression replaced by content, whose characters take the
// alignment of the match's last character (Hugging Face's replace).
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
