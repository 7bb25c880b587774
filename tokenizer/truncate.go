package tokenizer

import (
	"fmt"
	"slices"
)

// Truncation is a tokenizer.json's truncation: how many tokens an
// encoding keeps (max_length counts the special tokens the
// post-processor adds), which text of a pair loses them, and from which
// end. A stride is accepted and, as the overflowing windows it makes are
// not returned, only checked.
type Truncation struct {
	MaxLength int    `json:"max_length"`
	Strategy  string `json:"strategy"`  // LongestFirst (""), OnlyFirst, OnlySecond
	Direction string `json:"direction"` // Right (""), Left
	Stride    int    `json:"stride"`
}

// SetTruncation sets (or, with nil, removes) the truncation, as a model
// folder's length asks (a sequence model's max_seq_length). It fails as
// the Rust tokenizers' with_truncation fails: a stride the special
// tokens leave no room for.
func (t *Tokenizer) SetTruncation(tr *Truncation) error {
	if tr == nil {
		t.truncation = nil
		return nil
	}
	c := *tr
	if !slices.Contains([]string{"", "LongestFirst", "OnlyFirst", "OnlySecond"}, c.Strategy) || !slices.Contains([]string{"", "Right", "Left"}, c.Direction) {
		return fmt.Errorf("%w: truncation strategy %q, direction %q", ErrUnsupported, c.Strategy, c.Direction)
	}
	if c.MaxLength < 0 || c.Stride < 0 {
		return fmt.Errorf("%w: truncation max_length %d, stride %d (neither may be negative)", ErrFormat, c.MaxLength, c.Stride)
	}
	if added := t.addedBy(false); c.Stride > 0 && c.MaxLength-added < c.Stride {
		return fmt.Errorf("%w: truncation stride %d is not below max_length %d less the %d special tokens", ErrFormat, c.Stride, c.MaxLength, added)
	}
	t.truncation = &c
	return nil
}

// Truncation returns the tokenizer's truncation, or nil.
func (t *Tokenizer) Truncation() *Truncation {
	if t.truncation == nil {
		return nil
	}
	c := *t.truncation
	return &c
}

// addedBy is how many special tokens the post-processor adds.
func (t *Tokenizer) addedBy(pair bool) int {
	if t.post == nil {
		return 0
	}
	return t.post.added(pair)
}

// truncate cuts the sequences as the crate's truncate_encodings does,
// to max_length less what the post-processor adds.
func (t *Tokenizer) truncate(a, b []token, pair bool) ([]token, []token, error) {
	tr := t.truncation
	budget := tr.MaxLength - t.addedBy(pair)
	if budget < 0 {
		return nil, nil, fmt.Errorf("%w: truncation max_length %d is below the %d special tokens", ErrEncode, tr.MaxLength, t.addedBy(pair))
	}
	var err error
	cut := func(s []token, n int) []token {
		if n >= len(s) {
			return s
		}
		if n > 0 && tr.Stride >= n {
			err = fmt.Errorf("%w: truncation stride %d is not below the %d tokens a text keeps", ErrEncode, tr.Stride, n)
		}
		if tr.Direction == "Left" {
			return s[len(s)-n:]
		}
		return s[:n]
	}
	total := len(a) + len(b)
	if budget == 0 {
		return a[:0], b[:0], nil
	}
	if total <= budget {
		return a, b, nil
	}
	remove := total - budget
	switch {
	case tr.Strategy == "OnlyFirst" || tr.Strategy == "OnlySecond":
		target := &a
		if tr.Strategy == "OnlySecond" {
			if !pair {
				return nil, nil, fmt.Errorf("%w: truncation OnlySecond of a single text", ErrEncode)
			}
			target = &b
		}
		if len(*target) <= remove {
			return nil, nil, fmt.Errorf("%w: truncation %s: the text has %d tokens, %d must go", ErrEncode, tr.Strategy, len(*target), remove)
		}
		*target = cut(*target, len(*target)-remove)
	case pair:
		// LongestFirst: the shorter text keeps what it can, up to half.
		n1, n2 := len(a), len(b)
		swap := n1 > n2
		if swap {
			n1, n2 = n2, n1
		}
		if n1 > budget {
			n2 = n1
		} else {
			n2 = max(n1, budget-n1)
		}
		if n1+n2 > budget {
			n1 = budget / 2
			n2 = n1 + budget%2
		}
		if swap {
			n1, n2 = n2, n1
		}
		a, b = cut(a, n1), cut(b, n2)
	default:
		a = cut(a, budget)
	}
	return a, b, err
}
