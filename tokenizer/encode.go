package tokenizer

// Encode encodes one text. It fails where the Rust tokenizers fail: a
// character a model without an unknown token cannot encode, a pattern
// that does not finish, a truncation the special tokens leave no room
// for.
func (t *Tokenizer) Encode(text string) (Encoding, error) {
	return t.encode(text, "", false, 0)
}

// EncodePair encodes a pair of texts (a question and a passage).
func (t *Tokenizer) EncodePair(a, b string) (Encoding, error) {
	return t.encode(a, b, true, 0)
}

// EncodeWithin is Encode reading at most maxBytes of the text (0: no
// ceiling). With a truncation from the right, a longer text is read
// from its head (cut at a space between two ASCII letters or digits)
// when the tokenizer's steps end their pieces there: the head's tokens
// are then the whole text's, and a text of any length costs what the
// truncation keeps. A text that needs more than maxBytes read is
// ErrTextTooLong.
func (t *Tokenizer) EncodeWithin(text string, maxBytes int) (Encoding, error) {
	return t.encode(text, "", false, maxBytes)
}

// EncodePairWithin is EncodePair reading at most maxBytes of each text,
// as EncodeWithin.
func (t *Tokenizer) EncodePairWithin(a, b string, maxBytes int) (Encoding, error) {
	return t.encode(a, b, true, maxBytes)
}

func (t *Tokenizer) encode(a, b string, pair bool, maxBytes int) (Encoding, error) {
	first, err := t.headTokens(a, t.limit(0), maxBytes)
	if err != nil {
		return Encoding{}, err
	}
	var second []token
	if pair {
		if second, err = t.headTokens(b, t.limit(1), maxBytes); err != nil {
			return Encoding{}, err
		}
	}
	read := len(first) + len(second)
	if t.truncation != nil {
		if first, second, err = t.truncate(first, second, pair); err != nil {
			return Encoding{}, err
		}
	}
	truncated := len(first)+len(second) < read
	for i := range second {
		second[i].typeID = 1
	}
	seqs := [][]token{first}
	if pair {
		seqs = append(seqs, second)
	}
	e := t.encoding(seqs)
	e.Truncated = truncated
	return e, nil
}

// encoding post-processes sequences of tokens (adding special tokens)
// and lays them out as an Encoding.
func (t *Tokenizer) encoding(seqs [][]token) Encoding {
	if t.post != nil {
		seqs = t.post.process(seqs)
	}
	all := seqs[0]
	if len(seqs) > 1 {
		size := 0
		for _, s := range seqs {
			size += len(s)
		}
		all = make([]token, 0, size)
		for _, s := range seqs {
			all = append(all, s...)
		}
	}
	e := Encoding{
		IDs:               make([]int64, len(all)),
		TypeIDs:           make([]int64, len(all)),
		AttentionMask:     make([]int64, len(all)),
		Offsets:           make([][2]int, len(all)),
		Tokens:            make([]string, len(all)),
		SpecialTokensMask: make([]int64, len(all)),
	}
	for i, tk := range all {
		e.IDs[i], e.TypeIDs[i], e.AttentionMask[i] = int64(tk.id), int64(tk.typeID), 1
		e.Offsets[i], e.Tokens[i] = tk.offsets, tk.value
		if tk.special {
			e.SpecialTokensMask[i] = 1
		}
	}
	return e
}

// limit is how many tokens a text of the given type id is tokenized
// to before truncation, as the crate's early exit (do_tokenize): the
// whole max_length, every text but OnlySecond's first; -1 for no limit.
func (t *Tokenizer) limit(typeID int) int {
	tr := t.truncation
	if tr == nil || tr.Strategy == "OnlySecond" && typeID == 0 {
		return -1
	}
	return tr.MaxLength
}

// split is a piece of a text on its way to tokens: an added token, or
// text the model tokenizes.
type split struct {
	n   *normalized
	tok *token
}

// splits runs one text through added tokens, normalization and
// pre-tokenization, as the Rust tokenizers do: added tokens matched in
// the raw text are taken out first, the rest is normalized, then added
// tokens matched in the normalized text, then the pre-tokenizer splits
// what is left.
func (t *Tokenizer) splits(text string) ([]split, error) {
	runes := lossyRunes(text)
	var out []split
	for _, raw := range t.added.split(newNormalized(runes, 0), t.added.raw, nil) {
		if raw.tok != nil {
			out = append(out, raw)
			continue
		}
		if t.normalizer != nil {
			if t.normalizer.normalize(raw.n); raw.n.err != nil {
				return nil, raw.n.err
			}
		}
		for _, seg := range t.added.split(raw.n, t.added.nrm, nil) {
			switch {
			case seg.tok != nil, t.pre == nil:
				out = append(out, seg)
			default:
				pieces, err := t.pre.split(seg.n)
				if err != nil {
					return nil, err
				}
				for _, p := range pieces {
					out = append(out, split{n: p})
				}
			}
		}
	}
	return out, nil
}

// tokens tokenizes a text's splits. With a limit (not -1) it stops, as
// the crate's tokenize_with_limit, after the split that brings the count
// to the limit, from the end the truncation cuts at.
func (t *Tokenizer) tokens(text string, limit int) ([]token, error) {
	splits, err := t.splits(text)
	if err != nil {
		return nil, err
	}
	left := t.truncation != nil && t.truncation.Direction == "Left"
	if limit < 0 || !left {
		out := make([]token, 0, len(splits)+len(splits)/2+4)
		for _, s := range splits {
			if s.tok != nil {
				out = append(out, *s.tok)
				continue
			}
			if out, err = t.model.tokenize(s.n, out); err != nil {
				return nil, err
			}
			if limit >= 0 && len(out) >= limit {
				break
			}
		}
		return out, nil
	}
	// From the end: each split's tokens, then the splits kept in order.
	parts := make([][]token, len(splits))
	first, total := len(splits), 0
	for i := len(splits) - 1; i >= 0; i-- {
		s := splits[i]
		first = i
		if s.tok != nil {
			parts[i] = []token{*s.tok}
			total++
			continue
		}
		if parts[i], err = t.model.tokenize(s.n, nil); err != nil {
			return nil, err
		}
		if total += len(parts[i]); total >= limit {
			break
		}
	}
	var out []token
	for _, p := range parts[first:] {
		out = append(out, p...)
	}
	return out, nil
}
