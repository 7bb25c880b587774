package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// decoder turns tokens back into text, as a tokenizer.json's decoder
// (Hugging Face's decode_chain): each maps the tokens to new ones.
type decoder interface {
	decode(tokens []string) ([]string, error)
}

// Decode returns the text of ids, as the Rust tokenizers' decode: each
// id's token (an added token's text, or the model's), the special
// tokens left out if skipSpecial, through the decoder, joined. Without
// a decoder the tokens are joined by spaces. An id no token has is left
// out, as there.
func (t *Tokenizer) Decode(ids []int64, skipSpecial bool) (string, error) {
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		name, ok := t.added.decodeAs[int(id)]
		if !ok {
			if name, ok = t.model.token(int(id)); !ok {
				continue
			}
		}
		if skipSpecial && t.added.special[name] {
			continue
		}
		tokens = append(tokens, name)
	}
	if t.decoder == nil {
		return strings.Join(tokens, " "), nil
	}
	out, err := t.decoder.decode(tokens)
	if err != nil {
		return "", err
	}
	return strings.Join(out, ""), nil
}

// byteLevelDecoder is the ByteLevel decoder: the byte-level alphabet's
// characters read back as bytes (a token with another character kept as
// its own bytes), the bytes read as UTF-8, each invalid run as U+FFFD.
type byteLevelDecoder struct{}

func (byteLevelDecoder) decode(tokens []string) ([]string, error) {
	var buf []byte
	for _, tk := range tokens {
		start := len(buf)
		for _, c := range tk {
			b, ok := charByte[c]
			if !ok {
				buf = append(buf[:start], tk...)
				break
			}
			buf = append(buf, b)
		}
	}
	return []string{lossy(buf)}, nil
}

// charByte is bytesChar read backwards.
var charByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, c := range bytesChar {
		m[c] = byte(b)
	}
	return m
}()

// lossy is Rust's String::from_utf8_lossy.
func lossy(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(lossyRunes(string(b)))
}

// byteFallbackDecoder reads runs of <0xAB> tokens as bytes: a run that
// is UTF-8 becomes its text, one that is not a U+FFFD a byte.
type byteFallbackDecoder struct{}

func (byteFallbackDecoder) decode(tokens []string) ([]string, error) {
	var out []string
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, tk := range tokens {
		if len(tk) == 6 && strings.HasPrefix(tk, "<0x") && tk[5] == '>' {
			if b, err := strconv.ParseUint(tk[3:5], 16, 8); err == nil {
				run = append(run, byte(b))
				continue
			}
		}
		flush()
		out = append(out, tk)
	}
	flush()
	return out, nil
}

// fuseDecoder joins the tokens into one.
type fuseDecoder struct{}

func (fuseDecoder) decode(tokens []string) ([]string, error) {
	return []string{strings.Join(tokens, "")}, nil
}

// stripDecoder removes up to Start copies of Content from each token's
// start and up to Stop from its end.
type stripDecoder struct {
	Content string `json:"content"`
	Start   int    `json:"start"`
	Stop    int    `json:"stop"`
	c       rune
}

func (s *stripDecoder) decode(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for k, tk := range tokens {
		chars := []rune(tk)
		start, stop := 0, len(chars)
		for i := 0; i < s.Start && i < len(chars) && chars[i] == s.c; i++ {
			start = i + 1
		}
		for i := 0; i < s.Stop && i < len(chars) && chars[len(chars)-1-i] == s.c; i++ {
			stop = len(chars) - 1 - i
		}
		if start > stop {
			start = stop
		}
		out[k] = string(chars[start:stop])
	}
	return out, nil
}

// replaceDecoder replaces a pattern's matches in each token.
type replaceDecoder struct {
	Pattern patternSpec `json:"pattern"`
	Content string      `json:"content"`
	re      pattern
}

func (r *replaceDecoder) decode(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for k, tk := range tokens {
		runes := []rune(tk)
		matches, err := r.re.find(runes)
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, s := range cover(matches, len(runes)) {
			if s.match {
				b.WriteString(r.Content)
			} else {
				b.WriteString(string(runes[s.start:s.end]))
			}
		}
		out[k] = b.String()
	}
	return out, nil
}

// metaspaceDecoder turns the replacement back into spaces; in the first
// token it is removed, unless nothing was prepended.
type metaspaceDecoder struct {
	Replacement   string `json:"replacement"`
	PrependScheme string `json:"prepend_scheme"`
	AddPrefix     *bool  `json:"add_prefix_space"`
	rep           rune
}

func (m *metaspaceDecoder) decode(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for k, tk := range tokens {
		var b strings.Builder
		for _, c := range tk {
			switch {
			case c != m.rep:
				b.WriteRune(c)
			case k == 0 && m.PrependScheme != "never":
			default:
				b.WriteByte(' ')
			}
		}
		out[k] = b.String()
	}
	return out, nil
}

// wordPieceDecoder joins continuing pieces to the word before them,
// other tokens after a space, and cleans up spaces before punctuation.
type wordPieceDecoder struct {
	Prefix  string `json:"prefix"`
	Cleanup bool   `json:"cleanup"`
}

func (w *wordPieceDecoder) decode(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for i, tk := range tokens {
		if i != 0 {
			if rest, ok := strings.CutPrefix(tk, w.Prefix); ok {
				tk = rest
			} else {
				tk = " " + tk
			}
		}
		if w.Cleanup {
			tk = cleanup(tk)
		}
		out[i] = tk
	}
	return out, nil
}

// cleanup is the WordPiece decoder's, one replacement after another.
func cleanup(s string) string {
	for _, r := range [][2]string{{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
		{" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

// bpeDecoder replaces each token's end-of-word suffix by a space (by
// nothing in the last token).
type bpeDecoder struct {
	Suffix string `json:"suffix"`
}

func (d *bpeDecoder) decode(tokens []string) ([]string, error) {
	out := make([]string, len(tokens))
	for i, tk := range tokens {
		rep := " "
		if i == len(tokens)-1 {
			rep = ""
		}
		out[i] = strings.ReplaceAll(tk, d.Suffix, rep)
	}
	return out, nil
}

// sequenceDecoder applies decoders in order.
type sequenceDecoder []decoder

func (s sequenceDecoder) decode(tokens []string) ([]string, error) {
	var err error
	for _, d := range s {
		if tokens, err = d.decode(tokens); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

func newDecoder(t *typed) (decoder, error) {
	switch t.Type {
	case "ByteLevel":
		return byteLevelDecoder{}, nil
	case "ByteFallback":
		return byteFallbackDecoder{}, nil
	case "Fuse":
		return fuseDecoder{}, nil
	case "Strip":
		s := &stripDecoder{}
		if err := decodeInto(t, "decoder", s); err != nil {
			return nil, err
		}
		c, size := utf8.DecodeRuneInString(s.Content)
		if size == 0 || size != len(s.Content) || s.Start < 0 || s.Stop < 0 {
			return nil, fmt.Errorf("%w: decoder Strip wants one character and counts not below 0", ErrFormat)
		}
		s.c = c
		return s, nil
	case "Replace":
		r := &replaceDecoder{}
		if err := decodeInto(t, "decoder", r); err != nil {
			return nil, err
		}
		var err error
		r.re, err = r.Pattern.compile("Replace decoder")
		return r, err
	case "Metaspace":
		m := &metaspaceDecoder{Replacement: "▁", PrependScheme: "always"}
		if err := decodeInto(t, "decoder", m); err != nil {
			return nil, err
		}
		if m.AddPrefix != nil && !*m.AddPrefix {
			m.PrependScheme = "never"
		}
		c, size := utf8.DecodeRuneInString(m.Replacement)
		if size == 0 || size != len(m.Replacement) {
			return nil, fmt.Errorf("%w: decoder Metaspace replacement %q is not one character", ErrFormat, m.Replacement)
		}
		m.rep = c
		return m, nil
	case "WordPiece":
		w := &wordPieceDecoder{Prefix: "##", Cleanup: true}
		return w, decodeInto(t, "decoder", w)
	case "BPEDecoder":
		d := &bpeDecoder{Suffix: "</w>"}
		return d, decodeInto(t, "decoder", d)
	case "Sequence":
		seq, err := sequenceOf(t, "decoder", "decoders", newDecoder)
		return sequenceDecoder(seq), err
	}
	return nil, fmt.Errorf("%w: decoder %q (ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece, BPEDecoder and Sequence are)", ErrUnsupported, t.Type)
}
