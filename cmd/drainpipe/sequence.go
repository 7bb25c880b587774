package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// sequenceFlags are the flags of a sequence model (a transformer over
// token ids): predict and eval take them.
type sequenceFlags struct {
	tokens, typeIDs string
	text, tokenizer string
	// inModel has the model tokenize the text column itself (serve),
	// not the job's input side.
	inModel    bool
	buckets    string
	maxTokens  int
	window     int
	pooling    string
	normalize  bool
	refuseLong bool
	names      []string // the flags added
}

// defaultSequenceFlags are the flags' defaults, for commands without
// them (serve, inspect).
func defaultSequenceFlags() *sequenceFlags {
	return &sequenceFlags{maxTokens: seq.DefaultMaxTokens, window: 4096}
}

// add adds the flags; eval, whose --normalize is its confusion
// matrix's, scores no embeddings and leaves normalize out.
func (f *sequenceFlags) add(fs *pflag.FlagSet, normalize bool) {
	before := map[string]bool{}
	fs.VisitAll(func(fl *pflag.Flag) { before[fl.Name] = true })
	defer fs.VisitAll(func(fl *pflag.Flag) {
		if !before[fl.Name] {
			f.names = append(f.names, fl.Name)
		}
	})
	fs.StringVar(&f.tokens, "tokens-column", "", "sequence models: the column of token ids, a list of int32 or int64 a row (default: input_ids)")
	fs.StringVar(&f.text, "text-column", "", "sequence models: a column of text (string, large_string, string_view, dictionary), tokenized on the input side by the model folder's tokenizer.json or --tokenizer")
	fs.StringVar(&f.tokenizer, "tokenizer", "", "sequence models: the tokenizer.json that --text-column is encoded with (default: the model folder's)")
	fs.StringVar(&f.typeIDs, "type-ids-column", "", "sequence models: a column of token type ids, one a token (default: zeros)")
	fs.StringVar(&f.buckets, "seq-buckets", "", "sequence models: the lengths rows are padded to, ascending (default: spaced by 2^⅙ from 8 up to the model's longest); none: each sub-batch padded to its longest row, for devices that take any shape")
	fs.IntVar(&f.maxTokens, "max-batch-tokens", seq.DefaultMaxTokens, "sequence models: token slots a sub-batch may hold (rows × length)")
	fs.IntVar(&f.window, "window", 4096, "sequence models: rows sorted by length together (the batch of a sequence model)")
	fs.StringVar(&f.pooling, "pooling", "", "sequence models: how per-token outputs become one vector a row: mean, cls or last (default: the model folder's, or mean)")
	if normalize {
		fs.BoolVar(&f.normalize, "normalize", false, "sequence models: scale pooled embeddings to unit length (default: as the model folder says)")
	}
	fs.BoolVar(&f.refuseLong, "refuse-long", false, "sequence models: set aside rows longer than the longest length instead of truncating them at their end")
}

// hfFolder is what drainpipe reads of a Hugging Face model folder (as
// sentence-transformers and Text Embeddings Inference lay them out).
type hfFolder struct {
	model     string // the ONNX file
	padID     int64
	vocab     int64    // vocab_size: ids at or past it are row errors
	labels    []string // id2label, in id order
	maxLength int      // model_max_length, bounded by max_position_embeddings
	left      bool     // padding_side left
	pooling   string   // 1_Pooling's mode, if any
	normalize bool     // a Normalize module
	digest    string   // of the configuration files read
	tokenizer string   // its tokenizer.json, if it has one
}

// modelFile returns the ONNX file of a model folder: onnx/model.onnx or
// model.onnx.
func modelFile(dir string) (string, error) {
	for _, name := range []string{filepath.Join("onnx", "model.onnx"), "model.onnx"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name), nil
		}
	}
	return "", fmt.Errorf("model folder %s: no onnx/model.onnx or model.onnx", dir)
}

// readHFFolder reads the configuration beside an ONNX file: in its
// folder, or the folder above an onnx/ folder. Missing files leave the
// defaults; a file that does not parse is an error naming it.
func readHFFolder(modelPath string) (hfFolder, error) {
	f := hfFolder{model: modelPath}
	dir := filepath.Dir(modelPath)
	if filepath.Base(dir) == "onnx" {
		dir = filepath.Dir(dir)
	}
	h := sha256.New()
	read := func(name string, v any) (bool, error) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		io.WriteString(h, name)
		h.Write(data)
		if err := json.Unmarshal(data, v); err != nil {
			return false, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		return true, nil
	}
	var config struct {
		PadTokenID   *int64            `json:"pad_token_id"`
		ID2Label     map[string]string `json:"id2label"`
		MaxPositions int               `json:"max_position_embeddings"`
		VocabSize    int64             `json:"vocab_size"`
	}
	if _, err := read("config.json", &config); err != nil {
		return f, err
	}
	f.vocab = config.VocabSize
	if config.PadTokenID != nil {
		f.padID = *config.PadTokenID
	}
	if len(config.ID2Label) > 0 {
		ids := make([]int, 0, len(config.ID2Label))
		for k := range config.ID2Label {
			id, err := strconv.Atoi(k)
			if err != nil {
				return f, fmt.Errorf("config.json: id2label key %q is not a number", k)
			}
			ids = append(ids, id)
		}
		sort.Ints(ids)
		for i, id := range ids {
			if id != i {
				return f, fmt.Errorf("config.json: id2label has ids %v, want 0 to %d", ids, len(ids)-1)
			}
			f.labels = append(f.labels, config.ID2Label[strconv.Itoa(id)])
		}
	}
	var tok struct {
		MaxLength   float64 `json:"model_max_length"` // some say 1e30: no limit
		PaddingSide string  `json:"padding_side"`
	}
	if _, err := read("tokenizer_config.json", &tok); err != nil {
		return f, err
	}
	f.left = tok.PaddingSide == "left"
	f.maxLength = config.MaxPositions
	if tok.MaxLength > 0 && tok.MaxLength < 1<<20 && (f.maxLength == 0 || int(tok.MaxLength) < f.maxLength) {
		f.maxLength = int(tok.MaxLength)
	}
	var pool map[string]any
	if _, err := read(filepath.Join("1_Pooling", "config.json"), &pool); err != nil {
		return f, err
	}
	for key, mode := range map[string]string{"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_lasttoken": "last"} {
		if on, _ := pool[key].(bool); on {
			f.pooling = mode
		}
	}
	var modules []struct {
		Type string `json:"type"`
	}
	if _, err := read("modules.json", &modules); err != nil {
		return f, err
	}
	f.normalize = slices.ContainsFunc(modules, func(m struct {
		Type string `json:"type"`
	}) bool {
		return strings.HasSuffix(m.Type, ".Normalize")
	})
	f.digest = hex.EncodeToString(h.Sum(nil))
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
		f.tokenizer = filepath.Join(dir, "tokenizer.json")
	}
	return f, nil
}

// loadTokenizer loads the tokenizer --text-column is encoded with: the
// --tokenizer file, or the model folder's. It returns nil without
// --text-column, and the file's digest for the job's model id.
func (f *sequenceFlags) loadTokenizer(hf hfFolder) (*tokenizer.Tokenizer, string, error) {
	if f.text == "" {
		if f.tokenizer != "" {
			return nil, "", fmt.Errorf("--tokenizer encodes --text-column, which is not given")
		}
		return nil, "", nil
	}
	path := cmp.Or(f.tokenizer, hf.tokenizer)
	if path == "" {
		return nil, "", fmt.Errorf("--text-column %s: no tokenizer (the model folder has no tokenizer.json: give --tokenizer)", f.text)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("--tokenizer: %w", err)
	}
	tok, err := tokenizer.Load(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	return tok, hex.EncodeToString(sum[:]), nil
}

// sequenceOptions turns the flags and a model folder's configuration
// into the seq.Model's options, and a description of them for the job's
// model id (a resume must pad as the first run did).
func (f *sequenceFlags) options(hf hfFolder) ([]seq.Option, string, error) {
	maxLength := hf.maxLength
	if maxLength <= 0 {
		maxLength = 512
	}
	pl := seq.Planner{MaxTokens: f.maxTokens, MaxLength: maxLength}
	switch f.buckets {
	case "":
		pl.Buckets = seq.DefaultBuckets(maxLength)
	default:
		b, err := seq.ParseBuckets(f.buckets)
		if err != nil {
			return nil, "", fmt.Errorf("--seq-buckets: %w", err)
		}
		if len(b) > 0 && b[len(b)-1] > maxLength {
			return nil, "", fmt.Errorf("--seq-buckets: %d is longer than the model's %d positions", b[len(b)-1], maxLength)
		}
		pl.Buckets = b
	}
	if f.maxTokens < 1 {
		return nil, "", fmt.Errorf("--max-batch-tokens %d: want 1 or more", f.maxTokens)
	}
	pooling, err := seq.ParsePooling(cmp.Or(f.pooling, hf.pooling, "mean"))
	if err != nil {
		return nil, "", fmt.Errorf("--pooling: %w", err)
	}
	opts := []seq.Option{seq.WithPlanner(pl), seq.WithTokens(cmp.Or(f.tokens, seq.InputIDs)), seq.WithPadID(hf.padID), seq.WithPooling(pooling), seq.WithVocab(hf.vocab)}
	if f.typeIDs != "" {
		opts = append(opts, seq.WithTypeIDs(f.typeIDs))
	}
	if hf.left {
		opts = append(opts, seq.WithLeftPadding())
	}
	if f.normalize || hf.normalize {
		opts = append(opts, seq.WithNormalize())
	}
	if f.refuseLong {
		opts = append(opts, seq.WithRefuseLong())
	}
	if len(hf.labels) > 0 {
		opts = append(opts, seq.WithLabels(hf.labels))
	}
	desc := fmt.Sprintf("seq buckets=%v maxlen=%d tokens=%d pooling=%s normalize=%v refuse-long=%v tokens=%q types=%q folder=%s",
		pl.Buckets, maxLength, f.maxTokens, pooling, f.normalize || hf.normalize, f.refuseLong, f.tokens, f.typeIDs, hf.digest)
	return opts, desc, nil
}

// describeShapes says the shapes a sequence model's sub-batches may take,
// before the first: one line a length.
func describeShapes(m *seq.Model) string {
	pl := m.Planner()
	shapes := m.Shapes()
	if shapes == nil {
		return fmt.Sprintf("sequence shapes: no buckets; each sub-batch padded to its longest row (a multiple of %d, up to %d tokens), within %d token slots\n", pl.Multiple, pl.MaxLength, pl.MaxTokens)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sequence shapes: %d (rows × tokens), within %d token slots:\n", len(shapes), pl.MaxTokens)
	for i := 0; i < len(shapes); {
		j := i
		var rows []string
		for ; j < len(shapes) && shapes[j].Tokens == shapes[i].Tokens; j++ {
			rows = append(rows, strconv.Itoa(shapes[j].Rows))
		}
		fmt.Fprintf(&b, "  %4d tokens × %s rows\n", shapes[i].Tokens, strings.Join(rows, ", "))
		i = j
	}
	return b.String()
}

// check refuses sequence flags given for a model that is
// not a sequence model: they would be ignored.
func (f *sequenceFlags) check(fs *pflag.FlagSet, m *loadedModel) error {
	if m.seq != nil {
		return nil
	}
	for _, name := range f.names {
		if fs.Changed(name) {
			return fmt.Errorf("--%s is for sequence models (inputs input_ids, attention_mask, …); this model is not one", name)
		}
	}
	return nil
}

// sequenceJob makes a job run a sequence model: its batch is the window,
// its feature column the token ids, or the text a tokenizer makes them
// of on the input side.
func (m *loadedModel) sequenceJob(cfg *job.Config) {
	cfg.Tokens, cfg.FeatureColumn, cfg.TypeIDsColumn = true, m.feature, m.typeIDs
	cfg.BatchSize, cfg.InputSize, cfg.Gather = m.window, 0, nil
	if m.tok != nil {
		cfg.FeatureColumn = m.text
		cfg.Stage = func(ds *dataset.Dataset) (*dataset.Dataset, error) {
			return tokenizer.Tokens(ds, m.tok, m.text, m.feature, cfg.Allocator)
		}
	}
}

// printSequenceStats says what a sequence model ran: tokens, padding,
// truncated rows and the shapes run.
func printSequenceStats(w io.Writer, s seq.Stats) {
	fmt.Fprintf(w, "tokens=%d token_slots=%d padding_waste=%.1f%% truncated=%d sub_batches=%d shapes=%d\n",
		s.Tokens, s.Slots, 100*s.PaddingWaste(), s.Truncated, s.SubBatches, len(s.Shapes))
}

// seqStatsDoc is a sequence model's part of --stats-json.
type seqStatsDoc struct {
	Rows         int64            `json:"rows"`
	Tokens       int64            `json:"tokens"`
	TokenSlots   int64            `json:"token_slots"`
	PaddingWaste float64          `json:"padding_waste"`
	Truncated    int64            `json:"truncated_rows"`
	SubBatches   int64            `json:"sub_batches"`
	Shapes       map[string]int64 `json:"shapes"` // "rows×tokens": sub-batches run
}

func sequenceStats(s *seq.Stats) *seqStatsDoc {
	if s == nil {
		return nil
	}
	doc := &seqStatsDoc{Rows: s.Rows, Tokens: s.Tokens, TokenSlots: s.Slots, PaddingWaste: s.PaddingWaste(),
		Truncated: s.Truncated, SubBatches: s.SubBatches, Shapes: map[string]int64{}}
	for sh, n := range s.Shapes {
		doc.Shapes[sh.String()] = n
	}
	return doc
}
