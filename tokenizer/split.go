package tokenizer

import (
	"fmt"
	"unicode"

	"github.com/drainpipe/drainpipe/tokenizer/internal/uniprops"
)

// span is a run of a text's characters [start, end) and whether a
// pattern matched it (Hugging Face's Pattern::find_matches).
type span struct {
	start, end int
	match      bool
}

// behavior is a SplitDelimiterBehavior: what becomes of the matches.
type behavior string

const (
	removed            behavior = "Removed"
	isolated           behavior = "Isolated"
	mergedWithPrevious behavior = "MergedWithPrevious"
	mergedWithNext     behavior = "MergedWithNext"
	contiguous         behavior = "Contiguous"
)

func (b behavior) check() error {
	switch b {
	case removed, isolated, mergedWithPrevious, mergedWithNext, contiguous:
		return nil
	}
	return fmt.Errorf("%w: split behavior %q", ErrUnsupported, string(b))
}

// cover turns a pattern's matches into spans covering the whole text.
func cover(matches [][2]int, n int) []span {
	out := make([]span, 0, 2*len(matches)+1)
	prev := 0
	for _, m := range matches {
		if prev != m[0] {
			out = append(out, span{prev, m[0], false})
		}
		out = append(out, span{m[0], m[1], true})
		prev = m[1]
	}
	if prev != n {
		out = append(out, span{prev, n, false})
	}
	return out
}

// charMatches is the Pattern of a character class: each character it
// holds is a match of its own.
func charMatches(runes []rune, is func(rune) bool) []span {
	var out []span
	last := 0
	for i, r := range runes {
		if is(r) {
			if last < i {
				out = append(out, span{last, i, false})
			}
			out = append(out, span{i, i + 1, true})
			last = i + 1
		}
	}
	if last < len(runes) {
		out = append(out, span{last, len(runes), false})
	}
	return out
}

// splitBy is NormalizedString::split: the pieces of n that spans and a
// behavior make, empty ones dropped (as PreTokenizedString drops them).
func splitBy(n *normalized, spans []span, b behavior) []*normalized {
	type cut struct {
		start, end int
		remove     bool
	}
	var cuts []cut
	prevMatch := false
	switch b {
	case isolated:
		for _, s := range spans {
			cuts = append(cuts, cut{s.start, s.end, false})
		}
	case removed:
		for _, s := range spans {
			cuts = append(cuts, cut{s.start, s.end, s.match})
		}
	case contiguous:
		for _, s := range spans {
			if s.match == prevMatch && len(cuts) > 0 {
				cuts[len(cuts)-1].end = s.end
			} else {
				cuts = append(cuts, cut{s.start, s.end, false})
			}
			prevMatch = s.match
		}
	case mergedWithPrevious:
		for _, s := range spans {
			if s.match && !prevMatch && len(cuts) > 0 {
				cuts[len(cuts)-1].end = s.end
			} else {
				cuts = append(cuts, cut{s.start, s.end, false})
			}
			prevMatch = s.match
		}
	case mergedWithNext:
		for i := len(spans) - 1; i >= 0; i-- {
			s := spans[i]
			if s.match && !prevMatch && len(cuts) > 0 {
				cuts[len(cuts)-1].start = s.start
			} else {
				cuts = append(cuts, cut{s.start, s.end, false})
			}
			prevMatch = s.match
		}
		for i, j := 0, len(cuts)-1; i < j; i, j = i+1, j-1 {
			cuts[i], cuts[j] = cuts[j], cuts[i]
		}
	}
	out := make([]*normalized, 0, len(cuts))
	for _, c := range cuts {
		if !c.remove && c.start < c.end {
			out = append(out, n.slice(c.start, c.end))
		}
	}
	return out
}

// splitPre is the Split pre-tokenizer: a string or regular expression's
// matches (or, inverted, what lies between them) split as behavior says.
type splitPre struct {
	Pattern  patternSpec `json:"pattern"`
	Behavior behavior    `json:"behavior"`
	Invert   bool        `json:"invert"`
	re       pattern
}

func (s *splitPre) init() error {
	if err := s.Behavior.check(); err != nil {
		return err
	}
	re, err := s.Pattern.compile("Split")
	if err != nil {
		return err
	}
	s.re = re
	return nil
}

func (s *splitPre) split(n *normalized) ([]*normalized, error) {
	matches, err := s.re.find(n.runes)
	if err != nil {
		return nil, err
	}
	spans := cover(matches, len(n.runes))
	if s.Invert {
		for i := range spans {
			spans[i].match = !spans[i].match
		}
	}
	return splitBy(n, spans, s.Behavior), nil
}

// charSplit is a pre-tokenizer that splits at a class of characters:
// WhitespaceSplit, Punctuation, Digits and CharDelimiterSplit.
type charSplit struct {
	is       func(rune) bool
	behavior behavior
}

func (c charSplit) split(n *normalized) ([]*normalized, error) {
	return splitBy(n, charMatches(n.runes, c.is), c.behavior), nil
}

// whitespacePre is the Whitespace pre-tokenizer: runs of word characters
// and runs of other characters that are not white space (\w+|[^\w\s]+).
type whitespacePre struct{}

func (whitespacePre) split(n *normalized) ([]*normalized, error) {
	var out []*normalized
	for i := 0; i < len(n.runes); {
		r := n.runes[i]
		if isSpace(r) {
			i++
			continue
		}
		word := isWordChar(r)
		j := i + 1
		for j < len(n.runes) && !isSpace(n.runes[j]) && isWordChar(n.runes[j]) == word {
			j++
		}
		out = append(out, n.slice(i, j))
		i = j
	}
	return out, nil
}

// isWordChar is the regex crate's \w (Unicode 16.0): alphabetic, marks,
// decimal digits, connector punctuation and the joiners.
func isWordChar(r rune) bool {
	return unicode.In(r, uniprops.Alphabetic16, uniprops.Mark16, uniprops.Decimal16, unicode.Pc, unicode.Join_Control)
}

// isNumeric is Rust's char::is_numeric: Nd, Nl and No (Unicode 17.0).
func isNumeric(r rune) bool {
	return r >= '0' && r <= '9' || r >= 0x80 && unicode.Is(uniprops.Numeric17, r)
}

// sequencePre applies pre-tokenizers in order, each to the pieces of the
// one before.
type sequencePre []preTokenizer

func (s sequencePre) split(n *normalized) ([]*normalized, error) {
	pieces := []*normalized{n}
	for _, p := range s {
		var next []*normalized
		for _, piece := range pieces {
			out, err := p.split(piece)
			if err != nil {
				return nil, err
			}
			next = append(next, out...)
		}
		pieces = next
	}
	return pieces, nil
}
