package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/pflag"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/hfmodel"
	"github.com/drainpipe/drainpipe/internal/cliflag"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/seq"
	"github.com/drainpipe/drainpipe/tokenizer"
)

// sequenceFlags are the flags of a sequence model (a transformer over
// token ids): predict and eval take them.
type sequenceFlags struct {
	tokens, typeIDs string
	text, tokenizer string
	textPair        string        // --text-pair-column
	maxTextBytes    cliflag.Bytes // a row's text ceiling
	// servesText takes the model folder's tokenizer along (serve), which
	// encodes the text of requests into the model's token inputs.
	servesText bool
	// warmUp runs the largest shape as each session starts (serve): a
	// server's memory is at its peak before it takes traffic.
	warmUp     bool
	buckets    string
	maxTokens  int
	window     int
	pooling    string
	normalize  bool
	refuseLong bool
	maxMemory  int64    // --max-memory, which bounds --window
	names      []string // the flags added
}

// defaultSequenceFlags are the flags' defaults, for commands without
// them (serve, inspect).
func defaultSequenceFlags() *sequenceFlags {
	return &sequenceFlags{maxTokens: seq.DefaultMaxTokens, window: 4096, maxTextBytes: tokenizer.DefaultMaxTextBytes}
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
	fs.StringVar(&f.textPair, "text-pair-column", "", "sequence models: a second column of text, each row encoded with --text-column's as a pair (a cross-encoder's query and passage)")
	fs.Var(&f.maxTextBytes, "max-text-bytes", "sequence models: the most bytes of a row's text (and of its pair) the tokenizer reads; a longer text is read from its head where the tokenizer allows, else the row is set aside or fails the job")
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

// pairTypeIDs names the type-id column the tokenizer makes of text
// pairs, on the input side.
const pairTypeIDs = "token_type_ids"

// windowBytes bounds a window by memory: its rows at the model's length,
// as int64 ids, must fit in --max-memory (or the reader's default).
const windowBytes = 2 << 30

// loadTokenizer returns the tokenizer --text-column is encoded with: the
// --tokenizer file, truncating at the model's length as the folder's
// does, or the folder's own. It returns nil without --text-column, and
// the file's digest for the job's model id.
func (f *sequenceFlags) loadTokenizer(folder *hfmodel.Folder) (*tokenizer.Tokenizer, string, error) {
	if f.text == "" {
		if f.tokenizer != "" {
			return nil, "", fmt.Errorf("--tokenizer encodes --text-column, which is not given")
		}
		return nil, "", nil
	}
	if f.tokenizer == "" {
		if folder.Tokenizer == nil {
			return nil, "", fmt.Errorf("--text-column %s: no tokenizer (the model folder has no tokenizer.json: give --tokenizer)", f.text)
		}
		return folder.Tokenizer, folder.Digest, nil
	}
	data, err := os.ReadFile(f.tokenizer)
	if err != nil {
		return nil, "", fmt.Errorf("--tokenizer: %w", err)
	}
	tok, err := tokenizer.Load(bytes.NewReader(data))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", f.tokenizer, err)
	}
	tr := &tokenizer.Truncation{MaxLength: folder.MaxLength}
	if folder.Tokenizer != nil {
		tr = folder.Tokenizer.Truncation()
	}
	if err := tok.SetTruncation(tr); err != nil {
		return nil, "", fmt.Errorf("%s: truncation to the model's %d tokens: %w", f.tokenizer, folder.MaxLength, err)
	}
	sum := sha256.Sum256(data)
	return tok, hex.EncodeToString(sum[:]), nil
}

// options turns the flags and a model folder into the seq.Model's
// options (after the folder's own) and a description of them for the
// job's model id (a resume must pad as the first run did). perToken says
// whether the model has per-token outputs, which --pooling and
// --normalize need.
func (f *sequenceFlags) options(folder *hfmodel.Folder, perToken bool) ([]seq.Option, string, error) {
	maxLength := folder.MaxLength
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
			return nil, "", fmt.Errorf("--seq-buckets: %d is longer than the model's %d tokens", b[len(b)-1], maxLength)
		}
		pl.Buckets = b
	}
	if f.maxTokens < 1 {
		return nil, "", fmt.Errorf("--max-batch-tokens %d: want 1 or more", f.maxTokens)
	}
	limit := cmp.Or(f.maxMemory, windowBytes)
	if f.window < 1 || int64(f.window) > limit/8/int64(maxLength) {
		return nil, "", fmt.Errorf("--window %d: want 1 to %d (a window's ids at the model's %d tokens must fit in %d bytes; --max-memory sets that)", f.window, limit/8/int64(maxLength), maxLength, limit)
	}
	if f.textPair != "" && f.text == "" {
		return nil, "", fmt.Errorf("--text-pair-column pairs with --text-column, which is not given")
	}
	if f.text != "" && f.tokens != "" {
		return nil, "", fmt.Errorf("--text-column %s and --tokens-column %s: give one (the text is tokenized into the ids the model reads; --tokens-column reads ids made before)", f.text, f.tokens)
	}
	if f.text != "" && f.typeIDs != "" {
		return nil, "", fmt.Errorf("--type-ids-column goes with --tokens-column; with --text-column the tokenizer makes the type ids")
	}
	if f.maxTextBytes <= 0 {
		return nil, "", fmt.Errorf("--max-text-bytes %d: want 1 or more", f.maxTextBytes)
	}
	if !perToken && (f.pooling != "" || f.normalize) {
		return nil, "", fmt.Errorf("--pooling and --normalize pool per-token outputs; this model has none (a classifier's outputs are per row)")
	}
	opts := []seq.Option{seq.WithPlanner(pl), seq.WithTokens(cmp.Or(f.tokens, seq.InputIDs))}
	poolings := folder.Poolings
	if f.pooling != "" {
		p, err := seq.ParsePooling(f.pooling)
		if err != nil {
			return nil, "", fmt.Errorf("--pooling: %w", err)
		}
		poolings = []seq.Pooling{p}
		opts = append(opts, seq.WithPooling(p))
	}
	normalized := len(folder.Modules) > 0 && folder.Modules[len(folder.Modules)-1] == seq.Module(seq.Normalize{})
	if f.normalize && !normalized {
		opts = append(opts, seq.WithNormalize())
	}
	if f.typeIDs != "" {
		opts = append(opts, seq.WithTypeIDs(f.typeIDs))
	}
	if f.textPair != "" {
		opts = append(opts, seq.WithTypeIDs(pairTypeIDs))
	}
	if f.refuseLong {
		opts = append(opts, seq.WithRefuseLong())
	}
	if f.warmUp {
		opts = append(opts, seq.WithWarmUp())
	}
	desc := fmt.Sprintf("seq buckets=%v maxlen=%d tokens=%d poolings=%v normalize=%v refuse-long=%v tokens=%q types=%q pair=%q positions=%d head=%s folder=%s",
		pl.Buckets, maxLength, f.maxTokens, poolings, f.normalize, f.refuseLong, f.tokens, f.typeIDs, f.textPair, folder.PositionStart, folder.Head.Function, folder.Digest)
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
	cfg.FeatureNamed = "--tokens-column"
	if m.tok != nil {
		cfg.FeatureColumn, cfg.FeatureNamed = m.text, "--text-column"
		opts := []tokenizer.Option{tokenizer.WithMaxTextBytes(int(m.maxTextBytes)), tokenizer.WithTruncatedCount(&m.cut)}
		cols := tokenizer.Columns{IDs: m.feature}
		if m.textPair != "" {
			// The pair's text is read along (a null pair is set aside as a
			// null text is); its type ids are the tokenizer's.
			cfg.TypeIDsColumn = m.textPair
			opts = append(opts, tokenizer.WithPair(m.textPair))
			cols.TypeIDs = pairTypeIDs
		}
		cfg.Stage = func(ds *dataset.Dataset, setAside func(arrow.RecordBatch, int, error)) (*dataset.Dataset, error) {
			if setAside != nil {
				opts = append(opts, tokenizer.WithRowErrors(setAside))
			}
			return tokenizer.Encodings(ds, m.tok, m.text, cols, cfg.Allocator, opts...)
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
