package hfmodel

import (
	"bytes"
	"cmp"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// legacyPoolings are the Pooling config's pooling_mode_* keys in the
// order sentence-transformers concatenates them.
var legacyPoolings = []struct {
	key  string
	mode seq.Pooling
}{
	{"pooling_mode_cls_token", seq.CLS},
	{"pooling_mode_max_tokens", seq.Max},
	{"pooling_mode_mean_tokens", seq.Mean},
	{"pooling_mode_mean_sqrt_len_tokens", seq.MeanSqrtLen},
	{"pooling_mode_weightedmean_tokens", seq.WeightedMean},
	{"pooling_mode_lasttoken", seq.Last},
}

// readModules reads modules.json's stack (or, without it, a 1_Pooling
// folder) and sentence_bert_config.json: the Transformer first, then
// Pooling, then Dense and Normalize modules. Any other module is an
// error naming it: a stack run without one of its modules is another
// model.
func (f *Folder) readModules(r *reader) error {
	var modules []struct {
		Idx  int    `json:"idx"`
		Path string `json:"path"`
		Type string `json:"type"`
	}
	found, err := r.json("modules.json", &modules)
	if err != nil {
		return err
	}
	if !found {
		// A folder without a stack: its 1_Pooling, if it has one.
		if err := f.readSentenceBERT(r, ""); err != nil {
			return err
		}
		_, err := f.readPooling(r, "1_Pooling")
		return err
	}
	sort.SliceStable(modules, func(i, j int) bool { return modules[i].Idx < modules[j].Idx })
	pooled := false
	for i, m := range modules {
		kind := m.Type[strings.LastIndex(m.Type, ".")+1:]
		at := fmt.Sprintf("modules.json: module %d (%s)", m.Idx, m.Type)
		switch {
		case kind == "Transformer" && i == 0:
			if err := f.readSentenceBERT(r, m.Path); err != nil {
				return err
			}
		case kind == "Pooling" && i == 1:
			found, err := f.readPooling(r, m.Path)
			if err != nil {
				return err
			}
			if !found {
				return fmt.Errorf("%w: %s: no %s", ErrFolder, at, filepath.Join(m.Path, "config.json"))
			}
			pooled = true
		case kind == "Dense" && pooled:
			d, err := readDense(filepath.Join(f.Dir, m.Path))
			if err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
			if err := r.hash(filepath.Join(m.Path, "config.json"), filepath.Join(m.Path, "model.safetensors")); err != nil {
				return err
			}
			f.Modules = append(f.Modules, d)
		case kind == "Normalize" && pooled:
			f.Modules = append(f.Modules, seq.Normalize{})
		case kind == "Transformer" || kind == "Pooling" || kind == "Dense" || kind == "Normalize":
			return fmt.Errorf("%w: %s: drainpipe runs a Transformer, then Pooling, then Dense and Normalize modules", ErrUnsupported, at)
		default:
			return fmt.Errorf("%w: %s: drainpipe runs Transformer, Pooling, Dense and Normalize modules", ErrUnsupported, at)
		}
	}
	return nil
}

// readSentenceBERT reads the Transformer module's settings.
func (f *Folder) readSentenceBERT(r *reader, path string) error {
	var cfg struct {
		MaxSeqLength int  `json:"max_seq_length"`
		DoLowerCase  bool `json:"do_lower_case"`
	}
	if _, err := r.json(filepath.Join(path, "sentence_bert_config.json"), &cfg); err != nil {
		return err
	}
	if cfg.DoLowerCase {
		return fmt.Errorf("%w: sentence_bert_config.json: do_lower_case (Python's str.lower before the tokenizer)", ErrUnsupported)
	}
	if cfg.MaxSeqLength > 0 {
		f.stLength = cfg.MaxSeqLength
	}
	return nil
}

// readPooling reads a Pooling module's config.json: pooling_mode (a
// name or a list) or the pooling_mode_* flags; none on means mean.
func (f *Folder) readPooling(r *reader, path string) (bool, error) {
	var cfg map[string]any
	name := filepath.Join(path, "config.json")
	found, err := r.json(name, &cfg)
	if err != nil || !found {
		return false, err
	}
	var modes []string
	switch v := cfg["pooling_mode"].(type) {
	case nil:
		for _, l := range legacyPoolings {
			if on, _ := cfg[l.key].(bool); on {
				modes = append(modes, l.mode.String())
			}
		}
	case string:
		modes = []string{v}
	case []any:
		for _, m := range v {
			s, _ := m.(string)
			modes = append(modes, s)
		}
	default:
		return false, fmt.Errorf("%w: %s: pooling_mode %v", ErrFolder, name, v)
	}
	if len(modes) == 0 {
		modes = []string{"mean"}
	}
	for _, m := range modes {
		p, err := seq.ParsePooling(m)
		if err != nil {
			return false, fmt.Errorf("%w: %s: %w", ErrUnsupported, name, err)
		}
		f.Poolings = append(f.Poolings, p)
	}
	// include_prompt false leaves out prompt tokens, and drainpipe adds
	// no prompt: nothing to do.
	return true, nil
}

// readTokenizer settles the length — the Transformer's
// max_seq_length, else model_max_length, else the positions, never past
// the positions — and loads tokenizer.json truncating there, as
// sentence-transformers' Transformer module calls its tokenizer.
func (f *Folder) readTokenizer(r *reader) error {
	f.MaxLength = cmp.Or(f.stLength, f.tokLength, f.PositionLimit, DefaultMaxLength)
	if f.PositionLimit > 0 {
		f.MaxLength = min(f.MaxLength, f.PositionLimit)
	}
	data, err := r.bytes("tokenizer.json")
	if data == nil || err != nil {
		return err
	}
	tok, err := tokenizer.Load(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(f.Dir, "tokenizer.json"), err)
	}
	tr := &tokenizer.Truncation{MaxLength: f.MaxLength, Strategy: "LongestFirst", Direction: "Right"}
	if f.truncateLeft {
		tr.Direction = "Left"
	}
	if err := tok.SetTruncation(tr); err != nil {
		return fmt.Errorf("%s: truncation to %d tokens: %w", filepath.Join(f.Dir, "tokenizer.json"), f.MaxLength, err)
	}
	f.Tokenizer = tok
	return nil
}
