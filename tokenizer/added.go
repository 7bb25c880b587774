package tokenizer

import (
	"fmt"
	"math"
	"unicode"
)

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedVocab is the added tokens as the Rust tokenizers' AddedVocabulary
// holds them: those matched in the raw text, and those (normalized: true)
// matched in the normalized text, each set found leftmost-longest in
// one pass over the text.
type addedVocab struct {
	byID     map[int]addedToken
	byText   map[string]int
	raw, nrm *trie           // nil when empty
	special  map[string]bool // the special tokens' texts
	decodeAs map[int]string  // each token's text, normalized if it is
}

// newAddedVocab adds the tokens as the crate's add_tokens does: a token
// takes the id its text has (an added token's, then the model's), or
// the next id from the model's size on; the file's id is not read.
func newAddedVocab(tokens []addedToken, m model, norm normalizer) (*addedVocab, error) {
	v := &addedVocab{byID: map[int]addedToken{}, byText: map[string]int{}, special: map[string]bool{}, decodeAs: map[int]string{}}
	next := m.vocabSize()
	for _, a := range tokens {
		if a.ID < 0 || a.ID > math.MaxUint32 {
			return nil, fmt.Errorf("%w: added token %q: id %d is not a u32", ErrFormat, a.Content, a.ID)
		}
		if a.Content == "" {
			continue
		}
		id, ok := v.byText[a.Content]
		if !ok {
			id, ok = m.id(a.Content)
		}
		if !ok {
			id = next
			next++
		}
		v.byText[a.Content] = id
		v.byID[id] = a
		if a.Special {
			v.special[a.Content] = true
		}
	}
	for id, a := range v.byID {
		pattern := []rune(a.Content)
		target := &v.raw
		if a.Normalized {
			target = &v.nrm
			if norm != nil {
				n := newNormalized(pattern, 0)
				norm.normalize(n)
				pattern = n.runes
			}
		}
		v.decodeAs[id] = string(pattern)
		if *target == nil {
			*target = &trie{next: map[trieKey]int32{}, value: []int32{-1}}
		}
		if len(pattern) == 0 {
			return nil, fmt.Errorf("%w: added token %q normalizes to nothing", ErrFormat, a.Content)
		}
		if err := (*target).insert(pattern, id); err != nil {
			return nil, fmt.Errorf("%w: added token %q: %w", ErrFormat, a.Content, err)
		}
	}
	return v, nil
}

// trie is the added tokens' texts, a node per prefix.
type trie struct {
	next  map[trieKey]int32
	value []int32 // the token id a node completes, or -1
	// The first characters of the texts: most characters start none,
	// and are passed without a lookup in the large map.
	firstASCII [128]bool
	firstWide  map[rune]bool
}

type trieKey struct {
	node int32
	r    rune
}

func (t *trie) insert(runes []rune, id int) error {
	if r := runes[0]; r < 128 {
		t.firstASCII[r] = true
	} else {
		if t.firstWide == nil {
			t.firstWide = map[rune]bool{}
		}
		t.firstWide[r] = true
	}
	node := int32(0)
	for _, r := range runes {
		child, ok := t.next[trieKey{node, r}]
		if !ok {
			child = int32(len(t.value))
			t.value = append(t.value, -1)
			t.next[trieKey{node, r}] = child
		}
		node = child
	}
	if t.value[node] >= 0 && int(t.value[node]) != id {
		return fmt.Errorf("its text is another added token's (id %d)", t.value[node])
	}
	t.value[node] = int32(id)
	return nil
}

// find returns the leftmost-longest match in runes[from:].
func (t *trie) find(runes []rune, from int) (start, end, id int, ok bool) {
	for i := from; i < len(runes); i++ {
		if r := runes[i]; r < 128 && !t.firstASCII[r] || r >= 128 && !t.firstWide[r] {
			continue
		}
		node, best := int32(0), -1
		for j := i; j < len(runes); j++ {
			child, ok := t.next[trieKey{node, runes[j]}]
			if !ok {
				break
			}
			node = child
			if t.value[node] >= 0 {
				best, id = j+1, int(t.value[node])
			}
		}
		if best > 0 {
			return i, best, id, true
		}
	}
	return 0, 0, 0, false
}

// split cuts n at the added tokens t finds, as the crate's find_matches:
// a single_word token only between non-word characters, lstrip and
// rstrip taking the white space beside a token into it.
func (v *addedVocab) split(n *normalized, t *trie, out []split) []split {
	if len(n.runes) == 0 {
		return out
	}
	if t == nil {
		return append(out, split{n: n})
	}
	runes := n.runes
	startOffset := 0
	for from := 0; ; {
		start, end, id, ok := t.find(runes, from)
		if !ok {
			break
		}
		from = end
		a := v.byID[id]
		stop := end
		if a.SingleWord {
			before := start == 0 || !isWordChar(runes[start-1])
			after := stop == len(runes) || !isWordChar(runes[stop])
			if !before || !after {
				continue
			}
		}
		if a.LStrip {
			s := start
			for s > 0 && unicode.Is(unicode.White_Space, runes[s-1]) {
				s--
			}
			start = max(s, startOffset)
		}
		if a.RStrip {
			for stop < len(runes) && unicode.Is(unicode.White_Space, runes[stop]) {
				stop++
			}
		}
		if startOffset < start {
			out = append(out, split{n: n.slice(startOffset, start)})
		}
		out = append(out, split{tok: &token{id: id, value: string(runes[start:stop]), offsets: n.span(start, stop)}})
		startOffset = stop
	}
	if startOffset < len(runes) {
		out = append(out, split{n: n.slice(startOffset, len(runes))})
	}
	return out
}
