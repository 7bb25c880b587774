package tokenizer

import (
	"slices"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/drainpipe/drainpipe/tokenizer/internal/uniprops"
)

// unicodeForm is the NFC, NFD, NFKC and NFKD normalizers, with
// alignments as the Rust tokenizers give them (the
// unicode-normalization-alignments crate, whose composition this follows
// step by step): each output character carries a change — 0 replaces one
// input character, +1 is added after one, -k replaces one and k more —
// and takes the alignment of the input character at its place.
type unicodeForm struct {
	compat  bool // NFK*: compatibility decomposition
	compose bool // NF*C: canonical composition after
}

// change is an output character and its change.
type change struct {
	r     rune
	delta int
}

// item is a decomposed character, with its combining class.
type item struct {
	ccc uint8
	change
}

// decompose is the crate's decomposition (canonical or compatibility):
// each character's decomposition — its first character replacing it, the
// others added — then each run of combining marks sorted by combining
// class, stably, their changes carried along.
func decompose(runes []rune, form norm.Form) []item {
	items := make([]item, 0, len(runes))
	for _, r := range runes {
		if unicode.Is(uniprops.NewerThan9, r) {
			// The crate's tables are Unicode 9.0's: a character assigned
			// since has no decomposition and combining class 0 there.
			items = append(items, item{0, change{r, 0}})
			continue
		}
		for k, d := range form.String(string(r)) {
			delta := 0
			if k > 0 {
				delta = 1
			}
			items = append(items, item{ccc(d), change{d, delta}})
		}
	}
	for i := 0; i < len(items); {
		if items[i].ccc == 0 {
			i++
			continue
		}
		j := i
		for j < len(items) && items[j].ccc != 0 {
			j++
		}
		slices.SortStableFunc(items[i:j], func(a, b item) int { return int(a.ccc) - int(b.ccc) })
		i = j
	}
	return items
}

func ccc(r rune) uint8 { return norm.NFC.PropertiesString(string(r)).CCC() }

// unchanged reports whether the form leaves runes as they are: text of
// characters that Unicode 9.0 has already (whose normalization has not
// changed since) already in the form.
func (f unicodeForm) unchanged(runes []rune) bool {
	ascii := true
	for _, r := range runes {
		if r >= 0x80 {
			ascii = false
			if unicode.Is(uniprops.NewerThan9, r) {
				return false
			}
		}
	}
	if ascii {
		return true
	}
	form := norm.NFD
	switch {
	case f.compat && f.compose:
		form = norm.NFKC
	case f.compat:
		form = norm.NFKD
	case f.compose:
		form = norm.NFC
	}
	return form.IsNormalString(string(runes))
}

// compose returns the primary composite of a and b, if there is one in
// Unicode 9.0.
func compose(a, b rune) (rune, bool) {
	c := []rune(norm.NFC.String(string([]rune{a, b})))
	if len(c) == 1 && !unicode.Is(uniprops.NewerThan9, c[0]) {
		return c[0], true
	}
	return 0, false
}

func (f unicodeForm) normalize(n *normalized) {
	if f.unchanged(n.runes) {
		return
	}
	form := norm.NFD
	if f.compat {
		form = norm.NFKD
	}
	items := decompose(n.runes, form)
	if !f.compose {
		chars := make([]change, len(items))
		for k, it := range items {
			chars[k] = it.change
		}
		n.apply(chars)
		return
	}
	// Canonical composition.
	var out, buffer []change
	var composee *change
	var lastCCC *uint8
	for _, it := range items {
		ch, cls := it.change, it.ccc
		if composee == nil {
			if cls != 0 {
				out = append(out, ch)
				continue
			}
			c := ch
			composee = &c
			continue
		}
		k := *composee
		if lastCCC == nil {
			if r, ok := compose(k.r, ch.r); ok {
				composee = &change{r, k.delta + ch.delta - 1}
				continue
			}
			if cls == 0 {
				out = append(out, k)
				c := ch
				composee = &c
				continue
			}
			buffer = append(buffer, ch)
			c := cls
			lastCCC = &c
			continue
		}
		if *lastCCC >= cls {
			if cls == 0 {
				out = append(out, k)
				out = append(out, buffer...)
				buffer = buffer[:0]
				c := ch
				composee = &c
				lastCCC = nil
				continue
			}
			buffer = append(buffer, ch)
			c := cls
			lastCCC = &c
			continue
		}
		if r, ok := compose(k.r, ch.r); ok {
			composee = &change{r, k.delta + ch.delta - 1}
			continue
		}
		buffer = append(buffer, ch)
		c := cls
		lastCCC = &c
	}
	if composee != nil {
		out = append(out, *composee)
	}
	out = append(out, buffer...)
	n.apply(out)
}

// apply replaces the text by characters with changes, as Hugging Face's
// NormalizedString.transform aligns them.
func (n *normalized) apply(chars []change) {
	runes := make([]rune, 0, len(chars))
	align := make([][2]int, 0, len(chars))
	next := 0 // the input character a replacing character takes the place of
	for _, c := range chars {
		var a [2]int
		if c.delta > 0 {
			if next > 0 {
				a = n.align[next-1]
			}
		} else {
			if next < len(n.align) {
				a = n.align[next]
			}
			next += 1 - c.delta
		}
		runes = append(runes, c.r)
		align = append(align, a)
	}
	n.runes, n.align = runes, align
}
