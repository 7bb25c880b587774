package tokenizer

import (
	"encoding/json"
	"fmt"
)

// template is a post-processor: TemplateProcessing, or BertProcessing
// (its [CLS] $A [SEP] $B:1 [SEP]:1 special case).
type template struct {
	single, pair []piece
	specials     map[string]special
}

// piece is a template's item: a sequence (A or B) or a special token.
type piece struct {
	sequence string // "A" or "B"; "" for a special token
	special  string
	typeID   int
}

// templateItem is one item of a TemplateProcessing template.
type templateItem struct {
	SpecialToken *templateRef `json:"SpecialToken"`
	Sequence     *templateRef `json:"Sequence"`
}

type templateRef struct {
	ID     string `json:"id"`
	TypeID int    `json:"type_id"`
}

type special struct {
	IDs    []int    `json:"ids"`
	Tokens []string `json:"tokens"`
}

// roberta is RobertaProcessing: <s> A </s> and <s> A </s></s> B </s>,
// every type id 0, with byte-level offsets trimmed first.
type roberta struct {
	Sep            []json.RawMessage `json:"sep"`
	Cls            []json.RawMessage `json:"cls"`
	TrimOffsets    bool              `json:"trim_offsets"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	sep, cls       token
}

func (r *roberta) added(pair bool) int {
	if pair {
		return 4
	}
	return 2
}

func (r *roberta) process(seqs [][]token) [][]token {
	n := 4
	for _, seq := range seqs {
		n += len(seq)
	}
	out := append(make([]token, 0, n), r.cls)
	for i, seq := range seqs {
		if r.TrimOffsets {
			trimOffsets(seq, r.AddPrefixSpace)
		}
		if i > 0 {
			out = append(out, r.sep)
		}
		for _, t := range seq {
			t.typeID = 0
			out = append(out, t)
		}
		out = append(out, r.sep)
	}
	return [][]token{out}
}

// byteLevelPost is the ByteLevel post-processor: offsets trimmed, no
// tokens added.
type byteLevelPost struct {
	TrimOffsets    bool `json:"trim_offsets"`
	AddPrefixSpace bool `json:"add_prefix_space"`
}

func (p *byteLevelPost) added(bool) int { return 0 }

func (p *byteLevelPost) process(seqs [][]token) [][]token {
	if p.TrimOffsets {
		for _, seq := range seqs {
			trimOffsets(seq, p.AddPrefixSpace)
		}
	}
	return seqs
}

// sequencePost is the Sequence post-processor: each processor's output
// is the next one's input (Llama 3's ByteLevel, then a template).
type sequencePost []postProcessor

func (s sequencePost) added(pair bool) int {
	n := 0
	for _, p := range s {
		n += p.added(pair)
	}
	return n
}

func (s sequencePost) process(seqs [][]token) [][]token {
	for _, p := range s {
		seqs = p.process(seqs)
	}
	return seqs
}

// specialPair reads a [token, id] pair of a processor's JSON.
func specialPair(raw []json.RawMessage, what string) (token, error) {
	var t token
	if len(raw) != 2 || json.Unmarshal(raw[0], &t.value) != nil || json.Unmarshal(raw[1], &t.id) != nil {
		return t, fmt.Errorf("%w: post_processor: %s wants [token, id]", ErrFormat, what)
	}
	t.special = true
	return t, nil
}

func newPostProcessor(t *typed) (postProcessor, error) {
	switch t.Type {
	case "RobertaProcessing":
		r := &roberta{TrimOffsets: true}
		if err := json.Unmarshal(t.raw, r); err != nil {
			return nil, fmt.Errorf("%w: post_processor: %w", ErrFormat, err)
		}
		var err error
		if r.sep, err = specialPair(r.Sep, "sep"); err != nil {
			return nil, err
		}
		if r.cls, err = specialPair(r.Cls, "cls"); err != nil {
			return nil, err
		}
		return r, nil
	case "ByteLevel":
		p := &byteLevelPost{}
		if err := json.Unmarshal(t.raw, p); err != nil {
			return nil, fmt.Errorf("%w: post_processor: %w", ErrFormat, err)
		}
		return p, nil
	case "Sequence":
		seq, err := sequenceOf(t, "post_processor", "processors", newPostProcessor)
		return sequencePost(seq), err
	}
	return newTemplate(t)
}

func newTemplate(t *typed) (*template, error) {
	switch t.Type {
	case "TemplateProcessing":
		var doc struct {
			Single, Pair  []templateItem
			SpecialTokens map[string]special `json:"special_tokens"`
		}
		if err := json.Unmarshal(t.raw, &doc); err != nil {
			return nil, fmt.Errorf("%w: post_processor: %w", ErrFormat, err)
		}
		tp := &template{specials: doc.SpecialTokens}
		for i, items := range [][]templateItem{doc.Single, doc.Pair} {
			var ps []piece
			for _, it := range items {
				switch {
				case it.Sequence != nil:
					ps = append(ps, piece{sequence: it.Sequence.ID, typeID: it.Sequence.TypeID})
				case it.SpecialToken != nil:
					if sp, ok := tp.specials[it.SpecialToken.ID]; !ok || len(sp.IDs) != len(sp.Tokens) {
						return nil, fmt.Errorf("%w: post_processor: special token %q has no ids, or not a token for each", ErrFormat, it.SpecialToken.ID)
					}
					ps = append(ps, piece{special: it.SpecialToken.ID, typeID: it.SpecialToken.TypeID})
				}
			}
			if i == 0 {
				tp.single = ps
			} else {
				tp.pair = ps
			}
		}
		return tp, nil
	case "BertProcessing":
		var doc struct {
			Sep []json.RawMessage `json:"sep"`
			Cls []json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(t.raw, &doc); err != nil || len(doc.Sep) != 2 || len(doc.Cls) != 2 {
			return nil, fmt.Errorf("%w: post_processor: BertProcessing wants sep and cls as [token, id]", ErrFormat)
		}
		var sep, cls string
		var sepID, clsID int
		if json.Unmarshal(doc.Sep[0], &sep) != nil || json.Unmarshal(doc.Sep[1], &sepID) != nil ||
			json.Unmarshal(doc.Cls[0], &cls) != nil || json.Unmarshal(doc.Cls[1], &clsID) != nil {
			return nil, fmt.Errorf("%w: post_processor: BertProcessing wants sep and cls as [token, id]", ErrFormat)
		}
		return &template{
			single:   []piece{{special: cls}, {sequence: "A"}, {special: sep}},
			pair:     []piece{{special: cls}, {sequence: "A"}, {special: sep}, {sequence: "B", typeID: 1}, {special: sep, typeID: 1}},
			specials: map[string]special{cls: {IDs: []int{clsID}, Tokens: []string{cls}}, sep: {IDs: []int{sepID}, Tokens: []string{sep}}},
		}, nil
	}
	return nil, fmt.Errorf("%w: post_processor %q (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and Sequence are)", ErrUnsupported, t.Type)
}

// added returns how many tokens the template adds to a single text or a
// pair.
func (tp *template) added(pair bool) int {
	items := tp.single
	if pair {
		items = tp.pair
	}
	n := 0
	for _, p := range items {
		if p.sequence == "" {
			n += len(tp.specials[p.special].IDs)
		}
	}
	return n
}

// process lays out the sequences with the template's special tokens.
func (tp *template) process(seqs [][]token) [][]token {
	items := tp.single
	if len(seqs) > 1 {
		items = tp.pair
	}
	var out []token
	for _, p := range items {
		switch p.sequence {
		case "A", "B":
			k := 0
			if p.sequence == "B" {
				k = 1
			}
			if k >= len(seqs) {
				continue
			}
			seq := seqs[k]
			for _, t := range seq {
				t.typeID = p.typeID
				out = append(out, t)
			}
		default:
			s := tp.specials[p.special]
			for i, id := range s.IDs {
				out = append(out, token{id: id, value: s.Tokens[i], typeID: p.typeID, special: true})
			}
		}
	}
	return [][]token{out}
}
