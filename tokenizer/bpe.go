package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	ranks       map[uint64]merge  // pairKey(a, b)
	unk         int
	names       reverseVocab
	prefix      string
	suffix      string
	cache       wordCache
}

// wordCache keeps the symbols of the words seen, as the Rust BPE's
// cache: words under 256 bytes, up to 10,000 of them.
type wordCache struct {
	words sync.Map // string → []symbol
	size  atomic.Int64
}

const (
	cacheWords   = 10000
	cacheMaxWord = 256
)

func (c *wordCache) get(word string) ([]symbol, bool) {
	if len(word) >= cacheMaxWord {
		return nil, false
	}
	v, ok := c.words.Load(word)
	if !ok {
		return nil, false
	}
	return v.([]symbol), true
}

func (c *wordCache) put(word string, syms []symbol) {
	if len(word) >= cacheMaxWord || c.size.Load() >= cacheWords {
		return
	}
	if _, loaded := c.words.LoadOrStore(word, syms); !loaded {
		c.size.Add(1)
	}
}

type merge struct{ rank, id int }

// pairKey is a merge's key: two token ids in one word (a map of
// uint64 keys takes the fast path).
func pairKey(a, b int) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func (b *bpe) init() error {
	if err := checkIDs(b.Vocab, "BPE"); err != nil {
		return err
	}
	switch {
	case b.Dropout != nil && *b.Dropout > 0:
		return fmt.Errorf("%w: BPE dropout (a random tokenization)", ErrUnsupported)
	}
	b.unk = -1
	if b.UnkToken != nil {
		id, ok := b.Vocab[*b.UnkToken]
		if !ok {
			return fmt.Errorf("%w: BPE unk_token %q is not in the vocabulary", ErrFormat, *b.UnkToken)
		}
		b.unk = id
	}
	if b.Prefix != nil {
		b.prefix = *b.Prefix
	}
	if b.Suffix != nil {
		b.suffix = *b.Suffix
	}
	b.ranks = make(map[uint64]merge, len(b.Merges))
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
		// The second token's continuing_subword_prefix is left out of
		// the merged one.
		if len(pair[1]) < len(b.prefix) {
			return fmt.Errorf("%w: BPE merge %d %q: %q is shorter than continuing_subword_prefix", ErrFormat, rank, pair, pair[1])
		}
		id, okID := b.Vocab[pair[0]+pair[1][len(b.prefix):]]
		if !okA || !okC || !okID {
			return fmt.Errorf("%w: BPE merge %d %q: a token not in the vocabulary", ErrFormat, rank, pair)
		}
		// A pair merged twice takes its last rank, as the crate's map.
		b.ranks[pairKey(a, c)] = merge{rank, id}
	}
	return nil
}

func (b *bpe) vocabSize() int { return len(b.Vocab) }

func (b *bpe) id(token string) (int, bool) { id, ok := b.Vocab[token]; return id, ok }

func (b *bpe) token(id int) (string, bool) { return b.names.get(b.Vocab, id) }

// symbol is a part of a piece being merged: its token and its runes.
type symbol struct {
	id         int
	start, end int // runes of the piece
}

func (b *bpe) tokenize(word *normalized, out []token) ([]token, error) {
	if len(word.runes) == 0 {
		return out, nil
	}
	s := string(word.runes)
	if b.IgnoreMerge {
		if id, ok := b.Vocab[s]; ok {
			return append(out, token{id: id, value: s, offsets: word.span(0, len(word.runes))}), nil
		}
	}
	syms, ok := b.cache.get(s)
	if !ok {
		syms = b.merge(b.symbols(word.runes))
		b.cache.put(s, syms)
	}
	for _, sym := range syms {
		out = append(out, token{id: sym.id, value: b.name(sym.id), offsets: word.span(sym.start, sym.end)})
	}
	return out, nil
}

func (b *bpe) name(id int) string {
	name, _ := b.names.get(b.Vocab, id)
	return name
}

// symbols are a word's characters as tokens (the later ones with
// continuing_subword_prefix, the last with end_of_word_suffix): a
// character not in the vocabulary as its bytes' tokens (byte_fallback),
// else unk_token (runs of them fused with fuse_unk), else dropped.
func (b *bpe) symbols(runes []rune) []symbol {
	syms := make([]symbol, 0, len(runes))
	unk := -1 // the pending unknown symbol's start
	flushUnk := func(end int) {
		if unk >= 0 {
			syms = append(syms, symbol{id: b.unk, start: unk, end: end})
			unk = -1
		}
	}
	var buf []byte
	for i, r := range runes {
		buf = buf[:0]
		if i > 0 {
			buf = append(buf, b.prefix...)
		}
		buf = append(buf, string(r)...)
		if i == len(runes)-1 {
			buf = append(buf, b.suffix...)
		}
		if id, ok := b.Vocab[string(buf)]; ok {
			flushUnk(i)
			syms = append(syms, symbol{id: id, start: i, end: i + 1})
			continue
		}
		if b.ByteFall {
			if ids, ok := b.byteIDs(buf); ok {
				for _, id := range ids {
					syms = append(syms, symbol{id: id, start: i, end: i + 1})
				}
				continue
			}
		}
		if b.unk < 0 {
			continue // dropped, as there without an unk_token
		}
		if unk >= 0 && !b.FuseUnk {
			flushUnk(i)
		}
		if unk < 0 {
			unk = i
		}
	}
	flushUnk(len(runes))
	return syms
}

// byteIDs are the tokens <0x00>…<0xFF> of the bytes of s, if all are in
// the vocabulary.
func (b *bpe) byteIDs(s []byte) ([]int, bool) {
	ids := make([]int, len(s))
	for k, c := range s {
		id, ok := b.Vocab[byteToken[c]]
		if !ok {
			return nil, false
		}
		ids[k] = id
	}
	return ids, true
}

// byteToken is each byte's token name, <0x41>.
var byteToken = func() (t [256]string) {
	for i := range t {
		t[i] = fmt.Sprintf("<0x%02X>", i)
	}
	return t
}()

// mergeAt is a candidate merge of the symbol at pos with the next.
type mergeAt struct{ rank, pos, id int }

type mergeQueue []mergeAt

func (q mergeQueue) less(i, j int) bool {
	return q[i].rank < q[j].rank || q[i].rank == q[j].rank && q[i].pos < q[j].pos
}

// push and pop keep q a binary heap, without container/heap's boxing of
// each item.
func (q *mergeQueue) push(m mergeAt) {
	*q = append(*q, m)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *mergeQueue) pop() mergeAt {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(h) && h.less(l, small) {
			small = l
		}
		if r := l + 1; r < len(h) && h.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	*q = h
	return top
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
	q := make(mergeQueue, 0, n)
	push := func(i int) {
		if i < 0 || next[i] < 0 {
			return
		}
		if m, ok := b.ranks[pairKey(syms[i].id, syms[next[i]].id)]; ok {
			q.push(mergeAt{m.rank, i, m.id})
		}
	}
	for i := range n {
		push(i)
	}
	for len(q) > 0 {
		top := q.pop()
		i := top.pos
		if gone[i] || next[i] < 0 {
			continue
		}
		j := next[i]
		if m, ok := b.ranks[pairKey(syms[i].id, syms[j].id)]; !ok || m.id != top.id {
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
