package tokenizer

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// wordPiece is Hugging Face's WordPiece model: the greedy longest match
// first, a word's later pieces prefixed by ContinuingSubwordPrefix, a
// word with no match (or longer than MaxInputCharsPerWord) one UnkToken.
type wordPiece struct {
	Vocab                   map[string]int `json:"vocab"`
	UnkToken                string         `json:"unk_token"`
	ContinuingSubwordPrefix string         `json:"continuing_subword_prefix"`
	MaxInputCharsPerWord    int            `json:"max_input_chars_per_word"`
	unk                     int
	names                   reverseVocab
}

func (w *wordPiece) init() error {
	if w.MaxInputCharsPerWord < 0 {
		return fmt.Errorf("WordPiece: max_input_chars_per_word %d", w.MaxInputCharsPerWord)
	}
	if err := checkIDs(w.Vocab, "WordPiece"); err != nil {
		return err
	}
	id, ok := w.Vocab[w.UnkToken]
	if !ok {
		return fmt.Errorf("WordPiece: unk_token %q is not in the vocabulary", w.UnkToken)
	}
	w.unk = id
	return nil
}

// token is one token of an encoding.
type token struct {
	id      int
	value   string
	offsets [2]int
	typeID  int
	special bool
}

func (w *wordPiece) vocabSize() int { return len(w.Vocab) }

func (w *wordPiece) id(token string) (int, bool) { id, ok := w.Vocab[token]; return id, ok }

func (w *wordPiece) token(id int) (string, bool) { return w.names.get(w.Vocab, id) }

// tokenize appends the pieces of one word.
func (w *wordPiece) tokenize(word *normalized, out []token) ([]token, error) {
	s := string(word.runes)
	if len(word.runes) > w.MaxInputCharsPerWord {
		return append(out, token{id: w.unk, value: w.UnkToken, offsets: word.span(0, len(word.runes))}), nil
	}
	// Byte offsets of each rune, to map a piece back to its runes.
	runeAt := make([]int, 0, len(s)+1)
	for i := range s {
		runeAt = append(runeAt, i)
	}
	runeAt = append(runeAt, len(s))
	runeIndex := func(b int) int {
		lo, hi := 0, len(runeAt)-1
		for lo < hi {
			m := (lo + hi) / 2
			if runeAt[m] < b {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo
	}
	n := len(out)
	for start := 0; start < len(s); {
		end := len(s)
		found := false
		for start < end {
			piece := s[start:end]
			if start > 0 {
				piece = w.ContinuingSubwordPrefix + piece
			}
			if id, ok := w.Vocab[piece]; ok {
				out = append(out, token{id: id, value: piece, offsets: word.span(runeIndex(start), runeIndex(end))})
				found = true
				break
			}
			_, size := utf8.DecodeLastRuneInString(s[start:end])
			end -= size
		}
		if !found {
			return append(out[:n], token{id: w.unk, value: w.UnkToken, offsets: word.span(0, len(word.runes))}), nil
		}
		start = end
	}
	return out, nil
}

// reverseVocab is a vocabulary's ids to tokens, made on first use: a
// slice where the ids are dense (as every real vocabulary's are), a map
// where they are not.
type reverseVocab struct {
	once  sync.Once
	dense []string
	names map[int]string
}

func (r *reverseVocab) get(vocab map[string]int, id int) (string, bool) {
	r.once.Do(func() {
		top := -1
		for _, i := range vocab {
			top = max(top, i)
		}
		if top < 2*len(vocab)+1024 {
			r.dense = make([]string, top+1)
		} else {
			r.names = make(map[int]string, len(vocab))
		}
		for name, i := range vocab {
			if i < 0 {
				continue
			}
			if r.dense != nil {
				if old := r.dense[i]; old == "" || name < old {
					r.dense[i] = name
				}
			} else if old, dup := r.names[i]; !dup || name < old {
				r.names[i] = name
			}
		}
	})
	if r.dense != nil {
		if id < 0 || id >= len(r.dense) || r.dense[id] == "" {
			return "", false
		}
		return r.dense[id], true
	}
	name, ok := r.names[id]
	return name, ok
}
