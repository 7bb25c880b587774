package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// precompiled is the Precompiled normalizer: SentencePiece's charsmap (a
// double-array trie over UTF-8 bytes, and the strings it maps to), applied
// as the Rust tokenizers apply it — grapheme cluster by grapheme cluster,
// each mapped whole (shorter than 6 bytes) by its shortest prefix that has
// a mapping, or else character by character — with the changes its
// replace gives.
type precompiled struct {
	Charsmap   string `json:"precompiled_charsmap"`
	units      []uint32
	normalized []byte
}

func (p *precompiled) init() error {
	data, err := base64.StdEncoding.DecodeString(p.Charsmap)
	if err != nil {
		return fmt.Errorf("%w: Precompiled charsmap: %w", ErrFormat, err)
	}
	if len(data) < 4 {
		return fmt.Errorf("%w: Precompiled charsmap of %d bytes", ErrFormat, len(data))
	}
	size := int(binary.LittleEndian.Uint32(data))
	if size%4 != 0 || 4+size > len(data) || size == 0 {
		return fmt.Errorf("%w: Precompiled charsmap: a trie of %d bytes in %d", ErrFormat, size, len(data))
	}
	p.units = make([]uint32, size/4)
	for i := range p.units {
		p.units[i] = binary.LittleEndian.Uint32(data[4+4*i:])
	}
	p.normalized = data[4+size:]
	if !utf8.Valid(p.normalized) {
		return fmt.Errorf("%w: Precompiled charsmap: its strings are not UTF-8", ErrFormat)
	}
	// A value unit (bit 31) is an offset into the strings.
	for i, u := range p.units {
		if u&(1<<31) != 0 && int(u&(1<<31-1)) > len(p.normalized) {
			return fmt.Errorf("%w: Precompiled charsmap: unit %d points at byte %d of %d bytes of strings", ErrFormat, i, u&(1<<31-1), len(p.normalized))
		}
	}
	return nil
}

// lookup returns the mapping of key's shortest prefix that has one
// (darts-clone's common prefix search, its first result).
func (p *precompiled) lookup(key string) (string, bool) {
	unit := func(pos uint32) (uint32, bool) {
		if int(pos) >= len(p.units) {
			return 0, false
		}
		return p.units[pos], true
	}
	offset := func(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
	u, _ := unit(0)
	pos := offset(u)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c == 0 {
			break
		}
		pos ^= uint32(c)
		var ok bool
		if u, ok = unit(pos); !ok || u&((1<<31)|0xFF) != uint32(c) {
			return "", false
		}
		pos ^= offset(u)
		if (u>>8)&1 == 1 {
			leaf, ok := unit(pos)
			if !ok {
				return "", false
			}
			start := int(leaf & (1<<31 - 1))
			if start > len(p.normalized) {
				return "", false
			}
			end := bytes.IndexByte(p.normalized[start:], 0)
			if end < 0 {
				end = len(p.normalized) - start
			}
			return string(p.normalized[start : start+end]), true
		}
	}
	return "", false
}

func (p *precompiled) normalize(n *normalized) {
	var out []change
	modified := false
	// replace is Hugging Face's: the new characters, the last ones marked
	// added, or the last one taking the removed ones (even one of an
	// earlier cluster, when the new part is empty).
	replace := func(old, new string) {
		diff := utf8.RuneCountInString(new) - utf8.RuneCountInString(old)
		for _, r := range new {
			out = append(out, change{r, 0})
		}
		switch {
		case diff > 0:
			for k := len(out) - 1; k >= 0 && k >= len(out)-diff; k-- {
				out[k].delta = 1
			}
		case diff < 0 && len(out) > 0:
			out[len(out)-1].delta += diff
		}
	}
	text := string(n.runes)
	state := -1
	for len(text) > 0 {
		var g string
		g, text, _, state = uniseg.FirstGraphemeClusterInString(text, state)
		if len(g) < 6 {
			if norm, ok := p.lookup(g); ok {
				modified = true
				replace(g, norm)
				continue
			}
		}
		for _, r := range g {
			part := string(r)
			if norm, ok := p.lookup(part); ok {
				modified = true
				replace(part, norm)
			} else {
				out = append(out, change{r, 0})
			}
		}
	}
	if modified {
		n.apply(out)
	}
}
