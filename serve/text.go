package serve

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/drainpipe/drainpipe/tokenizer"
)

// TextInput and TextPairInput name the BYTES inputs of a model that reads
// text: the texts, and a cross-encoder's second texts (the passages).
const (
	TextInput     = "text"
	TextPairInput = "text_pair"
)

// TextModel is how a sequence model's tokenizer encodes text for it. A
// model served with one takes text on every protocol; the server encodes
// each text once, and the usage, the length check and the ids the model
// runs all come from that encoding.
type TextModel struct {
	// Encode tokenizes a text, or a pair, as the model does, truncating
	// at its length.
	Encode func(text, pair string, isPair bool) (TextEncoding, error)
	// MaxLength is the most tokens a text keeps.
	MaxLength int
	// Pair says the model reads pairs of texts (a cross-encoder).
	Pair bool
	// Labels are a classifier's id2label, in id order.
	Labels []string
	// Pooling names an embedding model's pooling, for /info.
	Pooling string
	// Windows, when set, cuts a text longer than MaxLength into
	// overlapping windows of at most MaxLength tokens, each with its
	// special tokens (tokenizer.Windows): the embedding doors then embed
	// a long text as its windows pooled into one embedding, where they
	// would cut it.
	Windows func(text string) ([]TextEncoding, error)
	// Normalize says the model's embeddings are unit length, as a
	// pooled one is made again.
	Normalize bool
}

// TextEncoding is a tokenized text.
type TextEncoding struct {
	IDs []int64
	// TypeIDs are a pair's segment ids; nil for a single text.
	TypeIDs []int64
	Tokens  []string
	// Offsets are each token's span in characters (code points) of its
	// text (of the pair, for the pair's tokens; TypeIDs tell which).
	Offsets [][2]int
	Special []bool
	// Truncated reports a text longer than the model keeps.
	Truncated bool
}

// TokenizerEncode is TextModel.Encode of a tokenizer: it reads at most
// maxBytes of a text (and of a pair's), from its head where the
// tokenizer allows.
func TokenizerEncode(tok *tokenizer.Tokenizer, maxBytes int) func(text, pair string, isPair bool) (TextEncoding, error) {
	return func(text, pair string, isPair bool) (TextEncoding, error) {
		var e tokenizer.Encoding
		var err error
		if isPair {
			e, err = tok.EncodePairWithin(text, pair, maxBytes)
		} else {
			e, err = tok.EncodeWithin(text, maxBytes)
		}
		if err != nil {
			return TextEncoding{}, err
		}
		return textEncoding(e, isPair), nil
	}
}

// TokenizerWindows is TextModel.Windows of a tokenizer: the windows of
// maxLength tokens, stride apart, tokenizer.Windows cuts a text of at
// most maxBytes into, at most maxWindows of them.
func TokenizerWindows(tok *tokenizer.Tokenizer, maxLength, stride, maxBytes, maxWindows int) func(text string) ([]TextEncoding, error) {
	return func(text string) ([]TextEncoding, error) {
		var out []TextEncoding
		for e, err := range tok.Windows(text, maxLength, stride, maxBytes) {
			if err != nil {
				return nil, err
			}
			if len(out) == maxWindows {
				return nil, fmt.Errorf("the text makes more than %d windows of %d tokens (--max-chunks)", maxWindows, maxLength)
			}
			out = append(out, textEncoding(e, false))
		}
		return out, nil
	}
}

// textEncoding is a tokenizer's encoding as the server keeps it.
func textEncoding(e tokenizer.Encoding, pair bool) TextEncoding {
	out := TextEncoding{IDs: e.IDs, Tokens: e.Tokens, Offsets: e.Offsets, Truncated: e.Truncated, Special: make([]bool, len(e.IDs))}
	if pair {
		out.TypeIDs = e.TypeIDs
	}
	for i, s := range e.SpecialTokensMask {
		out.Special[i] = s == 1
	}
	return out
}

// errNoTokenizer refuses text to a model served without a tokenizer.
var errNoTokenizer = errors.New("takes token ids, not text: serve it from a model folder with a tokenizer.json to send text")

// encode encodes texts (and pairs, when not nil) once each. With
// refuseLong a text longer than the model keeps is refused, naming it;
// without, it is cut.
func (m *model) encode(texts, pairs []string, refuseLong bool) ([]TextEncoding, error) {
	if m.text == nil {
		return nil, invalid(fmt.Errorf("model %s %w", m.name, errNoTokenizer))
	}
	if (pairs != nil) != m.text.Pair {
		if m.text.Pair {
			return nil, invalid(fmt.Errorf("model %s reads pairs of texts (a query and a passage)", m.name))
		}
		return nil, invalid(fmt.Errorf("model %s reads single texts, not pairs", m.name))
	}
	encs := make([]TextEncoding, len(texts))
	for i, t := range texts {
		var pair string
		if pairs != nil {
			pair = pairs[i]
		}
		e, err := m.text.Encode(t, pair, pairs != nil)
		if err != nil {
			return nil, invalid(fmt.Errorf("input %d: %w", i, err))
		}
		if e.Truncated && refuseLong {
			return nil, invalid(fmt.Errorf("Input validation error: `inputs` must have less than %d tokens (input %d has more); send truncate: true to cut it", m.text.MaxLength, i))
		}
		encs[i] = e
	}
	return encs, nil
}

// usage is the tokens the encodings hold: what the model runs.
func usage(encs []TextEncoding) int {
	n := 0
	for _, e := range encs {
		n += len(e.IDs)
	}
	return n
}

// tokenInputs makes the model's token inputs of encodings, which it is
// about to run: their ids, and a pair model's type ids, as rows of their
// own lengths. The texts the tokenizer cut count as truncated rows.
func (m *model) tokenInputs(encs []TextEncoding) []*tensor {
	ids := make([][]int64, len(encs))
	cut := 0
	for i, e := range encs {
		ids[i] = e.IDs
		cut += btoi(e.Truncated)
	}
	m.textCut.Add(int64(cut))
	inputs := []*tensor{raggedTensor(m.input.Field(0).Name, ids)}
	if m.text.Pair && m.input.NumFields() > 1 {
		types := make([][]int64, len(encs))
		for i, e := range encs {
			types[i] = e.TypeIDs
		}
		inputs = append(inputs, raggedTensor(m.input.Field(1).Name, types))
	}
	return inputs
}

// raggedTensor is an INT64 [rows, longest] tensor of rows of their own
// lengths, unpadded.
func raggedTensor(name string, rows [][]int64) *tensor {
	n, width := 0, 0
	for _, r := range rows {
		n, width = n+len(r), max(width, len(r))
	}
	data, ends := make([]int64, 0, n), make([]int32, 1, len(rows)+1)
	for _, r := range rows {
		data = append(data, r...)
		ends = append(ends, int32(len(data)))
	}
	return &tensor{name: name, datatype: "INT64", shape: []int64{int64(len(rows)), int64(width)}, data: data, ends: ends}
}

// textTensors replaces a request's text inputs, for a model that reads
// text, by the token inputs of their encodings.
func (m *model) textTensors(inputs []*tensor) ([]*tensor, error) {
	var text, pair *tensor
	for _, t := range inputs {
		switch t.name {
		case TextInput:
			text = t
		case TextPairInput:
			pair = t
		}
	}
	if text == nil {
		if pair != nil {
			return nil, fmt.Errorf("input %q goes with %q, which is missing", TextPairInput, TextInput)
		}
		return inputs, nil
	}
	if len(inputs) != 1+btoi(pair != nil) {
		return nil, fmt.Errorf("inputs %s: text goes alone (and %q with it for a pair)", tensorNames(inputs), TextPairInput)
	}
	texts, err := stringRows(text)
	if err != nil {
		return nil, err
	}
	var pairs []string
	if pair != nil {
		if pairs, err = stringRows(pair); err != nil {
			return nil, err
		}
		if len(pairs) != len(texts) {
			return nil, fmt.Errorf("input %q: %d rows, but input %q has %d", TextPairInput, len(pairs), TextInput, len(texts))
		}
	}
	encs, err := m.encode(texts, pairs, false)
	if err != nil {
		return nil, err
	}
	return m.tokenInputs(encs), nil
}

// stringRows reads a BYTES [n] tensor as n UTF-8 texts.
func stringRows(t *tensor) ([]string, error) {
	texts, ok := t.data.([]string)
	if t.datatype != "BYTES" || !ok || len(t.shape) != 1 {
		return nil, fmt.Errorf("input %q: datatype %s shape %v, want BYTES [n]", t.name, t.datatype, t.shape)
	}
	for i, s := range texts {
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("input %q: row %d is not UTF-8", t.name, i)
		}
	}
	return texts, nil
}

func tensorNames(ts []*tensor) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.name
	}
	return names
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// listedInputs are the inputs a model's metadata lists: the texts of a
// model that reads text (it takes its token inputs too), else its own.
func (m *model) listedInputs() []TensorMetadata {
	if m.text == nil {
		return m.inputs
	}
	in := []TensorMetadata{{Name: TextInput, Datatype: "BYTES", Shape: []int64{-1}}}
	if m.text.Pair {
		in = append(in, TensorMetadata{Name: TextPairInput, Datatype: "BYTES", Shape: []int64{-1}})
	}
	return in
}

// byteSpans converts an encoding's character offsets into text to byte
// offsets, walking the text only as far as the last token kept.
func byteSpans(text string, offsets [][2]int) [][2]int {
	last := 0
	for _, o := range offsets {
		last = max(last, o[1])
	}
	starts := make([]int, 0, last+1) // byte offset of each character up to last
	for i := range text {
		if len(starts) > last {
			break
		}
		starts = append(starts, i)
	}
	starts = append(starts, len(text))
	at := func(c int) int { return starts[min(max(c, 0), len(starts)-1)] }
	spans := make([][2]int, len(offsets))
	for i, o := range offsets {
		spans[i] = [2]int{at(o[0]), at(o[1])}
	}
	return spans
}
