package tokenizer

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
)

// bpe is Hugging Face's BPE model: a piece's characters merged pair by
// pair, the lowest-ranked merge first (the leftmost among equals). A
// character not in the vocabulary is dropped without an unk_token, as
// there.
type bpe struct {
	Vocab       map[string]int    `json:"vocab"`
	Merges      []json.RawMessage `json:"merges"`
	UnkToken    *string           `json:"unk_token"`
	Dropout     *float64          `json:"dropout"`
	Prefix      *string           `json:"continuing_subword_prefix"`
	Suffix      *string           `json:"end_of_word_suffix"`
	FuseUnk     bool              `json:"fuse_unk"`
	ByteFall    bool              `json:"byte_fallback"`
	IgnoreMerge bool              `json:"ignore_merges"`
	ranks       map[[2]int]merge
	unk         int
}

type merge struct{ rank, id int }

func (b *bpe) init() error {
	switch {
	case b.Dropout != nil && *b.Dropout > 0:
		return fmt.Errorf("%w: BPE dropout (a random tokenization)", ErrUnsupported)
	case b.Prefix != nil && *b.Prefix != "", b.Suffix != nil && *b.Suffix != "":
		return fmt.Errorf("%w: BPE continuing_subword_prefix or end_of_word_suffix", ErrUnsupported)
	case b.ByteFall:
		return fmt.Errorf("%w: BPE byte_fallback", ErrUnsupported)
	}
	b.unk = -1
	if b.UnkToken != nil {
		id, ok := b.Vocab[*b.UnkToken]
		if !ok {
			return fmt.Errorf("%w: BPE unk_token %q is not in the vocabulary", ErrFormat, *b.UnkToken)
		}
		b.unk = id
	}
	b.ranks = make(map[[2]int]merge, len(b.Merges))
	for rank, raw := range b.Merges {
		// Merges are pairs, or (older files) strings "a b".
		var pair []string
		if err := json.Unmarshal(raw, &pair); err != nil {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("%w: BPE merge %d: %s", ErrFormat, rank, raw)
			}
			a, c, ok := strings.Cut(s, " ")
			if !ok {
				return fmt.Errorf("%w: BPE merge %d %q is not two tokens", ErrFormat, rank, s)
			}
			pair = []string{a, c}
		}
		if len(pair) != 2 {
			return fmt.Errorf("%w: BPE merge %d: %s", ErrFormat, rank, raw)
		}
		a, okA := b.Vocab[pair[0]]
		c, okC := b.Vocab[pair[1]]
		id, okID := b.Vocab[pair[0]+pair[1]]
		if !okA || !okC || !okID {
			return fmt.Errorf("%w: BPE merge %d %q: a token not in the vocabulary", ErrFormat, rank, pair)
		}
		if _, dup := b.ranks[[2]int{a, c}]; !dup {
			b.ranks[[2]int{a, c}] = merge{rank, id}
		}
	}
	return nil
}

func (b *bpe) vocabSize() int { return len(b.Vocab) }

// symbol is a part of a piece being merged: its token and its runes.
type symbol struct {
	id         int
	start, end int // runes of the piece
}

func (b *bpe) tokenize(word *normalized, out []token) []token {
	s := string(word.runes)
	if b.IgnoreMerge {
		if id, ok := b.Vocab[s]; ok {
			return append(out, token{id: id, value: s, offsets: word.span(0, len(word.runes))})
		}
	}
	syms := make([]symbol, 0, len(word.runes))
	for i, r := range word.runes {
		id, ok := b.Vocab[string(r)]
		switch {
		case ok:
		case b.unk >= 0:
			id = b.unk
			if b.FuseUnk && len(syms) > 0 && syms[len(syms)-1].id == b.unk {
				syms[len(syms)-1].end = i + 1
				continue
			}
		default:
			continue // dropped, as there without an unk_token
		}
		syms = append(syms, symbol{id: id, start: i, end: i + 1})
	}
	syms = b.merge(syms)
	for _, sym := range syms {
		value := string(word.runes[sym.start:sym.end])
		if sym.id == b.unk && b.UnkToken != nil {
			value = *b.UnkToken
		}
		out = append(out, token{id: sym.id, value: value, offsets: word.span(sym.start, sym.end)})
	}
	return out
}

// mergeAt is a candidate merge of the symbol at pos with the next.
type mergeAt struct{ rank, pos, id int }

type mergeQueue []mergeAt

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	return q[i].rank < q[j].rank || q[i].rank == q[j].rank && q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(mergeAt)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// merge applies the merges to a piece's symbols, the lowest rank first
// and the leftmost among equals, with a priority queue (as Hugging Face
// does): a piece of n characters costs n log n, however long.
func (b *bpe) merge(syms []symbol) []symbol {
	n := len(syms)
	next, prev, gone := make([]int, n), make([]int, n), make([]bool, n)
	for i := range n {
		next[i], prev[i] = i+1, i-1
	}
	if n > 0 {
		next[n-1] = -1
	}
	q := &mergeQueue{}
	push := func(i int) {
		if i < 0 || next[i] < 0 {
			return
		}
		if m, ok := b.ranks[[2]int{syms[i].id, syms[next[i]].id}]; ok {
			heap.Push(q, mergeAt{m.rank, i, m.id})
		}
	}
	for i := range n {
		push(i)
	}
	for q.Len() > 0 {
		top := heap.Pop(q).(mergeAt)
		i := top.pos
		if gone[i] || next[i] < 0 {
			continue
		}
		j := next[i]
		if m, ok := b.ranks[[2]int{syms[i].id, syms[j].id}]; !ok || m.id != top.id {
			continue // the pair changed since it was queued
		}
		syms[i] = symbol{id: top.id, start: syms[i].start, end: syms[j].end}
		gone[j] = true
		next[i] = next[j]
		if next[i] >= 0 {
			prev[next[i]] = i
		}
		push(prev[i])
		push(i)
	}
	out := syms[:0]
	for i := 0; i >= 0 && i < n; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}
