package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// patternSpec is a Split or Replace pattern as tokenizer.json writes it:
// a literal string or a regular expression in Oniguruma's syntax.
type patternSpec struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// pattern finds the non-overlapping matches of a pattern in a text, as
// rune index pairs, leftmost first.
type pattern interface {
	find(runes []rune) ([][2]int, error)
}

// matchTimeout bounds one regular expression match: Oniguruma, which the
// Rust tokenizers run, stops a match after ten million backtracking steps
// and fails the encoding; a pattern that backtracks without end fails
// here too, in bounded time.
const matchTimeout = 2 * time.Second

// compile reads the pattern of a component (named by what).
func (p patternSpec) compile(what string) (pattern, error) {
	switch {
	case p.String != nil && p.Regex != nil, p.String == nil && p.Regex == nil:
		return nil, fmt.Errorf("%w: %s pattern wants one of String and Regex", ErrFormat, what)
	case p.String != nil && *p.String == "":
		// The crate escapes a string into a regular expression: an
		// empty one matches between every two characters.
		return empty{}, nil
	case p.String != nil:
		return literal([]rune(*p.String)), nil
	}
	expr := *p.Regex
	if fast, ok := knownPatterns[expr]; ok {
		return fast, nil
	}
	re, err := regexp2.Compile(expr, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("%w: %s regular expression %q: %w", ErrUnsupported, what, expr, err)
	}
	re.MatchTimeout = matchTimeout
	return &regex{re: re}, nil
}

// literal is a String pattern: each occurrence, left to right.
type literal []rune

func (l literal) find(runes []rune) ([][2]int, error) {
	if len(l) == 0 {
		return nil, nil
	}
	var out [][2]int
	for i := 0; i+len(l) <= len(runes); {
		if runes[i] == l[0] && slices.Equal(runes[i:i+len(l)], l) {
			out = append(out, [2]int{i, i + len(l)})
			i += len(l)
			continue
		}
		i++
	}
	return out, nil
}

// empty is the empty pattern: a match at every character boundary.
type empty struct{}

func (empty) find(runes []rune) ([][2]int, error) {
	out := make([][2]int, len(runes)+1)
	for i := range out {
		out[i] = [2]int{i, i}
	}
	return out, nil
}

// regex is a Regex pattern, run by a backtracking engine that reads
// Oniguruma's syntax (lookahead, (?i:…), \p{…}).
type regex struct {
	re *regexp2.Regexp
}

// ErrPattern reports a regular expression of the tokenizer.json that did
// not finish matching a text in bounded time.
var ErrPattern = errors.New("tokenizer: pattern did not finish")

// find iterates as the onig crate's find_iter does: each search starts
// where the last match ended, and an empty match right where the last
// one ended is skipped by searching again a character on.
func (r *regex) find(runes []rune) ([][2]int, error) {
	var out [][2]int
	at, lastEnd := 0, -1
	for at <= len(runes) {
		m, err := r.re.FindRunesMatchStartingAt(runes, at)
		if err != nil {
			return nil, fmt.Errorf("%w: %q at character %d: %w", ErrPattern, r.re.String(), at, err)
		}
		if m == nil {
			break
		}
		s, e := m.RuneIndex, m.RuneIndex+m.RuneLength
		if s == e && e == lastEnd {
			at++
			continue
		}
		out = append(out, [2]int{s, e})
		lastEnd = e
		at = e
		if s == e {
			at++
		}
	}
	return out, nil
}

// knownPatterns are the Split patterns of widely used tokenizer.json
// files, matched by hand-written code that tests hold equal to the
// engine and to the Rust tokenizers (a regular expression engine pays a
// backtracking stack a character).
var knownPatterns = map[string]pattern{
	// Llama 3 (and tiktoken's cl100k): numbers in runs of up to three.
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: cl100k{digits: 3},
	// Qwen2 and Qwen3: each digit on its own.
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: cl100k{digits: 1},
	// GPT-2's, as the ByteLevel pre-tokenizer writes it.
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`: gpt2{},
}

// gpt2 is GPT-2's pattern (gpt2Match).
type gpt2 struct{}

func (gpt2) find(runes []rune) ([][2]int, error) {
	var out [][2]int
	for i := 0; i < len(runes); {
		end := gpt2Match(runes, i)
		out = append(out, [2]int{i, end})
		i = end
	}
	return out, nil
}

// cl100k is the pattern of Llama 3 and Qwen:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// its alternatives tried in order, as a backtracking engine does. Every
// character starts a match of one of them, so the matches tile the text.
type cl100k struct{ digits int }

func (c cl100k) find(runes []rune) ([][2]int, error) {
	var out [][2]int
	for i := 0; i < len(runes); {
		end := c.match(runes, i)
		out = append(out, [2]int{i, end})
		i = end
	}
	return out, nil
}

func (c cl100k) match(r []rune, i int) int {
	n := len(r)
	if end := contraction(r, i, true); end > 0 {
		return end
	}
	newline := func(ch rune) bool { return ch == '\r' || ch == '\n' }
	// [^\r\n\p{L}\p{N}]?\p{L}+
	j := i
	if !newline(r[j]) && !isL(r[j]) && !isN(r[j]) && j+1 < n && isL(r[j+1]) {
		j++
	}
	if isL(r[j]) {
		for j < n && isL(r[j]) {
			j++
		}
		return j
	}
	// \p{N}{1,digits}
	if isN(r[i]) {
		j := i
		for j < n && j-i < c.digits && isN(r[j]) {
			j++
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	other := func(ch rune) bool { return !isSpace(ch) && !isL(ch) && !isN(ch) }
	j = i
	if r[j] == ' ' && j+1 < n && other(r[j+1]) {
		j++
	}
	if other(r[j]) {
		for j < n && other(r[j]) {
			j++
		}
		for j < n && newline(r[j]) {
			j++
		}
		return j
	}
	// r[i] is white space here: \s*[\r\n]+ ends after the run's last
	// line break.
	end := spaceRun(r, i)
	for k := end - 1; k >= i; k-- {
		if newline(r[k]) {
			return k + 1
		}
	}
	return spaceMatch(r, i, end)
}
