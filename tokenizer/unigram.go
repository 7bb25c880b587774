package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// unigram is Hugging Face's Unigram model (SentencePiece's): the pieces of
// a text are the Viterbi path of highest total score, over the pieces that
// start at each character; a character no piece starts with is <unk> at
// the lowest score less 10, and runs of <unk> are one token.
type unigram struct {
	Vocab        [][2]json.RawMessage `json:"vocab"`
	UnkID        *int                 `json:"unk_id"`
	ByteFallback bool                 `json:"byte_fallback"`
	pieces       map[string]int
	scores       []float64
	longest      int // bytes of the longest piece
	unkScore     float64
}

// unkPenalty is how far below the lowest piece an unknown character
// scores (SentencePiece's kUnkPenalty).
const unkPenalty = 10.0

func (u *unigram) init() error {
	if u.ByteFallback {
		return fmt.Errorf("%w: Unigram byte_fallback", ErrUnsupported)
	}
	u.pieces = make(map[string]int, len(u.Vocab))
	u.scores = make([]float64, len(u.Vocab))
	minScore := math.Inf(1)
	for id, entry := range u.Vocab {
		var piece string
		if err := json.Unmarshal(entry[0], &piece); err != nil {
			return fmt.Errorf("%w: Unigram piece %d: %w", ErrFormat, id, err)
		}
		score, err := serdeFloat(string(entry[1]))
		if err != nil {
			return fmt.Errorf("%w: Unigram score of %q: %w", ErrFormat, piece, err)
		}
		u.scores[id] = score
		if _, dup := u.pieces[piece]; !dup {
			u.pieces[piece] = id
		}
		u.longest = max(u.longest, len(piece))
		minScore = min(minScore, u.scores[id])
	}
	if u.UnkID != nil && (*u.UnkID < 0 || *u.UnkID >= len(u.Vocab)) {
		return fmt.Errorf("%w: Unigram unk_id %d of %d pieces", ErrFormat, *u.UnkID, len(u.Vocab))
	}
	u.unkScore = minScore - unkPenalty
	return nil
}

func (u *unigram) vocabSize() int { return len(u.Vocab) }

// node is the best path ending at a byte of the piece.
type node struct {
	score  float64
	start  int // -1: no path ends here
	id     int
	hasUnk bool
}

func (u *unigram) tokenize(word *normalized, out []token) []token {
	s := string(word.runes)
	n := len(s)
	best := make([]node, n+1)
	for i := range best {
		best[i].start = -1
	}
	for start := 0; start < n; {
		_, size := utf8.DecodeRuneInString(s[start:])
		here := best[start].score
		single := false
		for end := start + 1; end <= min(n, start+u.longest); end++ {
			id, ok := u.pieces[s[start:end]]
			if !ok {
				continue
			}
			if cand := u.scores[id] + here; best[end].start < 0 || cand > best[end].score {
				best[end] = node{score: cand, start: start, id: id}
			}
			if end-start == size {
				single = true
			}
		}
		if !single {
			end := start + size
			if cand := u.unkScore + here; best[end].start < 0 || cand > best[end].score {
				unk := -1
				if u.UnkID != nil {
					unk = *u.UnkID
				}
				best[end] = node{score: cand, start: start, id: unk, hasUnk: true}
			}
		}
		start += size
	}
	// Back from the end: the path's pieces, runs of <unk> fused.
	type span struct{ start, end, id int }
	var spans []span
	for end := n; end > 0; end = best[end].start {
		nd := best[end]
		if nd.hasUnk && len(spans) > 0 && spans[len(spans)-1].id == nd.id && best[spans[len(spans)-1].end].hasUnk {
			spans[len(spans)-1].start = nd.start
			continue
		}
		spans = append(spans, span{nd.start, end, nd.id})
	}
	// Byte offsets to runes, to align the pieces to the input.
	runeAt := make([]int, n+1)
	r := 0
	for i := range s {
		runeAt[i] = r
		r++
	}
	runeAt[n] = r
	for k := len(spans) - 1; k >= 0; k-- {
		sp := spans[k]
		value := s[sp.start:sp.end]
		id := sp.id
		if pid, ok := u.pieces[value]; ok {
			id = pid
		}
		out = append(out, token{id: id, value: value, offsets: word.span(runeAt[sp.start], runeAt[sp.end])})
	}
	return out
}

// metaspace is the Metaspace pre-tokenizer: spaces become the
// replacement (▁), one is put first as prepend_scheme says, and the text
// splits before each.
type metaspace struct {
	Replacement    string `json:"replacement"`
	PrependScheme  string `json:"prepend_scheme"`
	AddPrefixSpace *bool  `json:"add_prefix_space"`
	Split          bool   `json:"split"`
	rep            rune
}

func (m *metaspace) init() error {
	r, size := utf8.DecodeRuneInString(m.Replacement)
	if size == 0 || size != len(m.Replacement) {
		return fmt.Errorf("%w: Metaspace replacement %q is not one character", ErrFormat, m.Replacement)
	}
	m.rep = r
	switch m.PrependScheme {
	case "always", "first", "never":
	default:
		return fmt.Errorf("%w: Metaspace prepend_scheme %q", ErrUnsupported, m.PrependScheme)
	}
	return nil
}

func (m *metaspace) split(n *normalized) []*normalized {
	for i, r := range n.runes {
		if r == ' ' {
			n.runes[i] = m.rep
		}
	}
	prepend := m.PrependScheme == "always" || m.PrependScheme == "first" && (len(n.align) == 0 || n.align[0][0] == 0)
	if prepend && len(n.runes) > 0 && n.runes[0] != m.rep {
		n.runes = append([]rune{m.rep}, n.runes...)
		n.align = append([][2]int{n.align[0]}, n.align...)
	}
	if len(n.runes) == 0 {
		return nil
	}
	if !m.Split {
		return []*normalized{n}
	}
	var pieces []*normalized
	start := 0
	for i, r := range n.runes {
		if r == m.rep && i > start {
			pieces = append(pieces, n.slice(start, i))
			start = i
		}
	}
	return append(pieces, n.slice(start, len(n.runes)))
}

// serdeFloat reads a JSON number as the Rust tokenizers read a score
// (serde_json without its float_roundtrip feature): the digits as an
// integer, then one multiplication or division by a power of ten. For
// 17 significant digits that can differ from the correctly rounded value
// in the last bit, and the best path between two pieces of equal total
// score turns on it.
func serdeFloat(s string) (float64, error) {
	i, neg := 0, false
	if i < len(s) && s[i] == '-' {
		neg, i = true, i+1
	}
	var sig uint64
	exp := 0
	digits := func(frac bool) {
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			d := uint64(s[i] - '0')
			if sig > (math.MaxUint64-d)/10 {
				// Past u64: the digits left are dropped (an integer's
				// count toward the exponent).
				for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
					if !frac {
						exp++
					}
				}
				return
			}
			sig = sig*10 + d
			if frac {
				exp--
			}
		}
	}
	start := i
	digits(false)
	if i < len(s) && s[i] == '.' {
		i++
		digits(true)
	}
	if i == start {
		return 0, fmt.Errorf("not a number: %s", s)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			return 0, fmt.Errorf("not a number: %s", s)
		}
		exp += e
		i = len(s)
	}
	if i != len(s) {
		return 0, fmt.Errorf("not a number: %s", s)
	}
	f := float64(sig)
	for f != 0 {
		if a := abs(exp); a <= 308 {
			pow, _ := strconv.ParseFloat("1e"+strconv.Itoa(a), 64)
			if exp >= 0 {
				f *= pow
			} else {
				f /= pow
			}
			break
		}
		if exp > 0 {
			return 0, fmt.Errorf("number out of range: %s", s)
		}
		f /= 1e308
		exp += 308
	}
	if neg {
		f = -f
	}
	return f, nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
