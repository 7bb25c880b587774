package tokenizer

import (
	"fmt"
	"iter"
	"slices"
)

// Windows encodes a text as overlapping windows of at most maxLength
// tokens each, special tokens included, every token of the text in at
// least one: the windows a right truncation at maxLength with stride
// makes in the Rust tokenizers, the encoding and its overflowing ones,
// in text order. Each window holds maxLength less the special tokens of
// the text's tokens, the next starting stride tokens before the last
// ended; the last holds what is left. A text that fits is one window,
// its Encode without truncation.
//
// The windows are those of tokenizers 0.22.2, which cut the whole
// text's encoding (Encoding::truncate). Since 0.23.1 the crate stops
// tokenizing at max_length, so a truncated encoding's overflowing
// windows come back incomplete (huggingface/tokenizers#2091, fix open
// in #2098).
//
// The tokenizer's own truncation and its head-only reading play no
// part: every token is read. maxBytes bounds the text (0: no bound); a
// longer one is ErrTextTooLong. A stride the window leaves no room for
// fails, as the crate's assertion does.
func (t *Tokenizer) Windows(text string, maxLength, stride, maxBytes int) iter.Seq2[Encoding, error] {
	return func(yield func(Encoding, error) bool) {
		room := maxLength - t.addedBy(false)
		switch {
		case room < 1:
			yield(Encoding{}, fmt.Errorf("%w: windows of %d tokens hold no text beside the %d special tokens", ErrEncode, maxLength, t.addedBy(false)))
			return
		case stride < 0 || stride >= room:
			yield(Encoding{}, fmt.Errorf("%w: stride %d: want 0 to %d, less than the %d tokens of text a window of %d holds", ErrEncode, stride, room-1, room, maxLength))
			return
		case maxBytes > 0 && len(text) > maxBytes:
			yield(Encoding{}, fmt.Errorf("%w: %d bytes, the ceiling is %d", ErrTextTooLong, len(text), maxBytes))
			return
		}
		toks, err := t.tokens(text, -1)
		if err != nil {
			yield(Encoding{}, err)
			return
		}
		for start := 0; ; start += room - stride {
			stop := min(start+room, len(toks))
			// A copy: the post-processor may append to what it is given,
			// and windows overlap.
			if !yield(t.encoding([][]token{slices.Clone(toks[start:stop])}), nil) || stop == len(toks) {
				return
			}
		}
	}
}
