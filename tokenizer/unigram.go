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

func (u *unigram) id(token string) (int, bool) { id, ok := u.pieces[token]; return id, ok }

func (u *unigram) token(id int) (string, bool) {
	if id < 0 || id >= len(u.Vocab) {
		return "", false
	}
	var piece string
	return piece, json.Unmarshal(u.Vocab[id][0], &piece) == nil
}

// node is the best path ending at a byte of the piece.
type node struct {
	score  float64
	start  int // -1: no path ends here
	id     int
	hasUnk bool
}

func (u *unigram) tokenize(word *normalized, out []token) ([]token, error) {
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
				if u.UnkID == nil {
					// As there: the unknown character's path is refused
					// when it is taken, whatever path wins in the end.
					return nil, fmt.Errorf("%w: Unigram: %q has no piece, and the model has no unk_id", ErrEncode, s[start:end])
				}
				best[end] = node{score: cand, start: start, id: *u.UnkID, hasUnk: true}
			}
		}
		start += size
	}
	// Back from the end: the path's pieces, runs of unk_id fused (the
	// unknown token's own piece among them, as there).
	type piece struct {
		start, end, id int
		unk            bool
	}
	var pieces []piece
	for end := n; end > 0; end = best[end].start {
		nd := best[end]
		unk := u.UnkID != nil && nd.id == *u.UnkID
		if unk && len(pieces) > 0 && pieces[len(pieces)-1].unk {
			pieces[len(pieces)-1].start = nd.start
			continue
		}
		pieces = append(pieces, piece{nd.start, end, nd.id, unk})
	}
	// Byte offsets to runes, to align the pieces to the input.
	runeAt := make([]int, n+1)
	r := 0
	for i := range s {
		runeAt[i] = r
		r++
	}
	runeAt[n] = r
	for k := len(pieces) - 1; k >= 0; k-- {
		p := pieces[k]
		value := s[p.start:p.end]
		offsets := word.span(runeAt[p.start], runeAt[p.end])
		id, ok := u.pieces[value]
		if !ok && u.ByteFallback {
			if bytes, ok := u.byteTokens(value, offsets); ok {
				out = append(out, bytes...)
				continue
			}
		}
		if !ok {
			id = p.id
		}
		out = append(out, token{id: id, value: value, offsets: offsets})
	}
	return out, nil
}

// byteTokens is byte_fallback: a text with no piece as its bytes'
// pieces (<0xE6>), each spanning the whole text, if all are there.
func (u *unigram) byteTokens(value string, offsets [2]int) ([]token, bool) {
	out := make([]token, 0, len(value))
	for i := range len(value) {
		name := fmt.Sprintf("<0x%02X>", value[i])
		id, ok := u.pieces[name]
		if !ok {
			return nil, false
		}
		out = append(out, token{id: id, value: name, offsets: offsets})
	}
	return out, true
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

func (m *metaspace) split(n *normalized) ([]*normalized, error) {
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
		return nil, nil
	}
	if !m.Split {
		return []*normalized{n}, nil
	}
	var pieces []*normalized
	start := 0
	for i, r := range n.runes {
		if r == m.rep && i > start {
			pieces = append(pieces, n.slice(start, i))
			start = i
		}
	}
	return append(pieces, n.slice(start, len(n.runes))), nil
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
