package tokenizer

import (
	"sort"

	"github.com/drainpipe/drainpipe/tokenizer/internal/uniprops"
)

// scriptAny is the script of a space (and of a code point no script
// has): it splits nothing and is no script to change from.
const scriptAny = 0

// scriptOf is the UnicodeScripts pre-tokenizer's script of r: Unicode
// 9.0's, with Hiragana, Katakana and the prolonged sound mark (U+30FC)
// counted as Han, and a space as none.
func scriptOf(r rune) uint8 {
	switch r {
	case ' ':
		return scriptAny
	case 0x30FC:
		return uniprops.ScriptHan
	}
	i := sort.Search(len(uniprops.Scripts9), func(i int) bool { return uniprops.Scripts9[i].Hi >= r })
	if i == len(uniprops.Scripts9) || uniprops.Scripts9[i].Lo > r {
		return scriptAny
	}
	switch s := uniprops.Scripts9[i].Script; s {
	case uniprops.ScriptHiragana, uniprops.ScriptKatakana:
		return uniprops.ScriptHan
	default:
		return s
	}
}

// unicodeScripts is the UnicodeScripts pre-tokenizer: the text split
// where the script changes, a space belonging to what is before it. As
// the crate's, it cuts before the first character of a script too, and
// keeps nothing before that cut: leading spaces (and code points of no
// script) are dropped, and a text of only those is dropped whole.
type unicodeScripts struct{}

func (unicodeScripts) split(n *normalized) ([]*normalized, error) {
	var out []*normalized
	start, last := -1, -1 // no script seen yet
	for i, r := range n.runes {
		s := int(scriptOf(r))
		if s == scriptAny || s == last {
			continue
		}
		if start >= 0 {
			out = append(out, n.slice(start, i))
		}
		start, last = i, s
	}
	if start >= 0 {
		out = append(out, n.slice(start, len(n.runes)))
	}
	return out, nil
}
