package job

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/storage"
)

var (
	// ErrOutputExists reports an output that exists, without Overwrite.
	ErrOutputExists = errors.New("job: output exists")
	// ErrInterrupted reports the parts of an interrupted run, without
	// Resume or Overwrite.
	ErrInterrupted = errors.New("job: an interrupted run left its parts")
	// ErrChanged reports a resume whose inputs, model or settings differ
	// from the interrupted run's.
	ErrChanged = errors.New("job: inputs, model or settings changed since the interrupted run")
	// ErrPartsDamaged reports, on resume, a committed part that is gone
	// or changed since it was written.
	ErrPartsDamaged = errors.New("job: the interrupted run's parts were changed")
	// ErrNotOutput reports an output folder that holds files the job did
	// not write; it is never written into or cleared.
	ErrNotOutput = errors.New("job: not a drainpipe output folder")
	// ErrRowsLost reports a run whose rows read, or written, differ from
	// the rows its inputs declare, or read: the run is not complete.
	ErrRowsLost = errors.New("job: rows lost")
	// ErrFeatures reports feature columns that are missing or unusable.
	ErrFeatures = fileset.ErrFeatures
	// ErrKeep reports a Keep column the input does not have.
	ErrKeep = fileset.ErrKeep
)

// Config describes a job.
type Config struct {
	Inputs []string // files or glob patterns
	Output string   // .parquet, .arrow or .arrows; or a folder (see Run)

	Model     device.Model
	ModelID   string // identifies the model's content (a digest), for resuming
	InputSize int    // features per row the model takes

	// FeatureColumn names the tensor column the model reads ("features").
	// With Gather set, it is made by gathering the scalar columns whose
	// names match the Gather patterns (path.Match syntax, such as "f*"),
	// in schema order.
	FeatureColumn string
	Gather        []string
	// FeatureNamed is how the user named FeatureColumn (a command's flag,
	// such as "--text-column"), for errors about it; it changes no byte.
	FeatureNamed string
	// Tokens says FeatureColumn holds a sequence model's token ids (a
	// list of integers a row, of any length; seq.Model): InputSize is not
	// used, and a null row is set aside in SetAside mode. TypeIDsColumn,
	// if set, is read along for the model and not written.
	Tokens        bool
	TypeIDsColumn string
	// Stage, if set, maps the input after its screening and before the
	// predictor, on the input side (a tokenizer making FeatureColumn's
	// text into the token ids a sequence model reads). Its changes of
	// schema reach the model; the output keeps Keep and Label. In
	// SetAside mode setAside is not nil: a row the stage cannot map (a
	// text too long to read) goes to it, with its record and index there,
	// and is left out of what the stage yields; otherwise such a row's
	// error ends the job.
	Stage func(ds *dataset.Dataset, setAside func(rec arrow.RecordBatch, i int, err error)) (*dataset.Dataset, error)
	Keep  []string // input columns written next to the predictions
	// Label, if set, is a column passed through after Keep (an evaluation's
	// labels) and never gathered as a feature; in SetAside mode a row
	// whose label is null is set aside.
	Label string

	BatchSize int
	PartRows  int // rows per durable part; rounded up to a multiple of BatchSize
	ReadRows  int // rows per file read (default 16384)
	// Prefetch lets the input side run this many batches ahead of the
	// device; -1 picks one file read's worth and two more, so decoding the
	// next read overlaps with the device.
	Prefetch int
	Shard    fileset.Shard

	Overwrite bool
	Resume    bool
	// BreakLock takes over the lock a job that died left on an output on
	// object storage (where no kernel frees it). A local output's lock
	// goes with its process and needs no breaking.
	BreakLock bool

	// CSVSample is how many rows of a CSV input its column types are
	// inferred from (fileset.WithCSVSample); 0 keeps the default.
	CSVSample int

	// SetAside, if set, is the file (.parquet, .arrow, .arrows) where rows
	// that cannot be predicted go, with their keys, source file, file row,
	// column and reason, while the job goes on: a null or ragged feature,
	// a value that does not parse, a row the device fails on its own (found
	// by bisecting the batch). Empty: the first such row ends the job with
	// an error naming its file, row and column.
	SetAside string

	// Pinned, if set, holds input objects' versions as a planner saw them
	// (storage.Opener.Pin, perhaps in another process, as Beam's expansion
	// of a job into shards): an input found at another version is
	// storage.ErrChanged, so the shards of one input never mix versions.
	Pinned map[string]storage.Info

	// MaxMemory bounds what the reader of one input file may hold at once
	// (fileset.WithMaxMemory); 0 derives it from the file's size. An
	// eighth of it, where that is under the sink's 64 MiB, bounds what a
	// Parquet output's row group holds before it is written, and as much
	// again the predictions queued for the output while it writes.
	MaxMemory int64

	// Predict holds further Predictor options (replicas, sessions). The
	// job's own come after them, so what the job owns — BatchSize,
	// Prefetch, the allocator, the columns passed through — stays its
	// fields' (the resume fingerprint and the part sizes use them).
	Predict []predict.Option
	// Progress, if set, is called after every batch with the rows done
	// and the total (-1 if unknown).
	Progress func(done, total int64)
	// Committed, if set, is called by RunUnits after each unit this
	// process committed.
	Committed func(u Unit, s *Summary)
	// TracerProvider, if set, traces the job: a span for the run, and
	// one a part (a unit in RunUnits), those a resume found committed
	// marked drainpipe.part.resumed. Nil traces nothing.
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	Allocator      memory.Allocator

	// badValue, in SetAside mode, takes CSV values that do not parse.
	badValue func(path string, fileRow int64, column string, err error)

	// readOnly marks a job that reads for a function (Read): no model.
	readOnly bool

	// shared marks the fingerprint of a job whose folder processes share
	// (PlanUnits); unit, the one unit a WriteUnit run writes.
	shared bool
	unit   *Unit

	// store reads and writes the output, and ctx is the run's context,
	// set for a run.
	store *storage.Opener
	ctx   context.Context

	// inject, set by tests, fails the job at the nth event of a phase
	// ("read", "predict", "part", "manifest", "merge").
	inject func(phase string, n int) error
}

// Summary reports a finished job.
type Summary struct {
	Output string `json:"output"`
	// Rows is the rows written: one per input row, RowsIn in all.
	Rows         int64 `json:"rows"`
	RowsIn       int64 `json:"rows_in"`
	RowsSetAside int64 `json:"rows_set_aside"`
	// AlreadyComplete reports a resume of a job whose output was complete.
	AlreadyComplete bool          `json:"already_complete,omitempty"`
	ResumedRows     int64         `json:"resumed_rows"`
	Batches         int64         `json:"batches"`
	PaddedRows      int64         `json:"padded_rows"`
	Parts           int           `json:"parts"`
	Wall            time.Duration `json:"wall_ns"`
	RowsPerSecond   float64       `json:"rows_per_second"`
	// Inputs gives, for each input object read (by URL), the requests
	// made and bytes fetched.
	Inputs map[string]storage.Traffic `json:"inputs,omitempty"`
	Stats  predict.Stats              `json:"-"`
	// Units reports a run of a shared folder's units (RunUnits).
	Units *UnitsSummary `json:"units,omitempty"`
}

// UnitsSummary reports what one process of a shared folder did.
type UnitsSummary struct {
	Total   int `json:"total"`   // units of the job
	Written int `json:"written"` // committed by this process
	Skipped int `json:"skipped"` // of its shard, committed before it came to them
	Taken   int `json:"taken"`   // of its shard, committed by another process first
	// Pending is the job's units not committed when the process ended:
	// 0 once the folder is complete (Sealed: this process wrote _SUCCESS,
	// or found it).
	Pending int  `json:"pending"`
	Sealed  bool `json:"sealed"`
}

func (c *Config) defaults() error {
	if c.FeatureColumn == "" {
		c.FeatureColumn = "features"
	}
	if c.BatchSize <= 0 {
		return fmt.Errorf("%w: got %d", predict.ErrBatchSize, c.BatchSize)
	}
	if c.PartRows <= 0 {
		c.PartRows = 1 << 18
	}
	c.PartRows = (c.PartRows + c.BatchSize - 1) / c.BatchSize * c.BatchSize
	if c.ReadRows <= 0 {
		c.ReadRows = 1 << 14
	}
	if c.Prefetch < 0 {
		c.Prefetch = c.ReadRows/c.BatchSize + 2
	}
	if c.Shard.Count == 0 {
		c.Shard = fileset.Shard{Index: 0, Count: 1}
	}
	if c.Allocator == nil {
		c.Allocator = memory.DefaultAllocator
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if !c.readOnly && (c.Model == nil || (c.InputSize <= 0 && !c.Tokens)) {
		return errors.New("job: a model and its input size are required")
	}
	return nil
}

// openStore sets the run's Opener, with the inputs Pinned pinned.
func (c *Config) openStore() {
	c.store = storage.NewOpener()
	for name, v := range c.Pinned {
		c.store.Expect(name, v)
	}
}

// kept returns the input columns passed through beside the predictions:
// Keep, then Label.
func (c *Config) kept() []string {
	if c.Label == "" {
		return c.Keep
	}
	return append(slices.Clone(c.Keep), c.Label)
}

// IsFolder reports whether output names a folder output: it ends in a
// path separator (a URL's key in /) or is an existing local folder.
func IsFolder(output string) bool {
	if storage.IsFolder(output) {
		return true
	}
	if storage.IsURL(output) {
		return false
	}
	st, err := os.Stat(output)
	return err == nil && st.IsDir()
}

// ErrOutputIsInput reports an output that is one of the inputs, or that
// would hold them.
var ErrOutputIsInput = errors.New("job: the output would replace an input")

// checkNotInput refuses an output that is an input file, or a parts
// folder (or folder output) that holds one.
func checkNotInput(output string, l layout, inputs []string) error {
	dir := strings.TrimSuffix(storage.Key(l.dir), "/")
	for _, in := range inputs {
		key := storage.Key(in)
		inside := l.dir != "" && (strings.HasPrefix(key, dir+"/") || strings.HasPrefix(key, dir+string(filepath.Separator)))
		if storage.SameFile(in, output) || inside {
			return fmt.Errorf("%w: %s is an input", ErrOutputIsInput, in)
		}
	}
	return nil
}

// errFinished reports an output this job completed in an earlier run.
var errFinished = errors.New("job: finished")

// checkOutput refuses to replace a complete output without Overwrite, and
// never touches a folder the job did not write.
func (c *Config) checkOutput(l layout, fingerprint string) error {
	complete := c.Output
	if l.folder {
		complete = l.path(successName)
		entries, err := l.store.List(l.ctx, l.dir)
		if err != nil {
			return fmt.Errorf("job: %w", err)
		}
		// Hidden files do not make a folder someone else's: a run killed
		// while writing its first manifest leaves only that file's
		// temporary copy (.NAME.tmp-…).
		entries = slices.DeleteFunc(entries, func(e storage.Entry) bool { return strings.HasPrefix(e.Name, ".") })
		if len(entries) > 0 && !slices.ContainsFunc(entries, func(e storage.Entry) bool {
			return e.Name == folderManifestName || e.Name == successName
		}) {
			return fmt.Errorf("%w: %s holds files of its own and no drainpipe manifest", ErrNotOutput, l.dir)
		}
	}
	if _, err := l.store.Stat(l.ctx, complete); err != nil || c.Overwrite {
		return nil
	}
	if c.Resume {
		if data, err := l.store.ReadFile(l.ctx, l.manifest()); err == nil {
			var m manifest
			if json.Unmarshal(data, &m) == nil && m.Fingerprint == fingerprint {
				return errFinished
			}
		}
		if !l.folder && writtenBy(l.store, c.Output) == fingerprint {
			return errFinished
		}
	}
	return fmt.Errorf("%w: %s", ErrOutputExists, c.Output)
}

// jobKey is the output file's schema metadata key naming the job (its
// fingerprint) that wrote it.
const jobKey = "drainpipe:job"

// writtenBy returns the fingerprint of the job that wrote the output file,
// or "" if it cannot tell.
func writtenBy(store *storage.Opener, output string) string {
	set, err := fileset.Open([]string{output}, fileset.WithOpener(store))
	if err != nil {
		return ""
	}
	md := set.Schema().Metadata()
	if i := md.FindKey(jobKey); i >= 0 {
		return md.Values()[i]
	}
	return ""
}

// outputRows returns the rows of a complete output file.
func outputRows(store *storage.Opener, output string) int64 {
	set, err := fileset.Open([]string{output}, fileset.WithOpener(store))
	if err != nil {
		return 0
	}
	if n := set.DeclaredRows(); n >= 0 {
		return n
	}
	ds, err := set.Dataset()
	if err != nil {
		return 0
	}
	n, _ := ds.Count()
	return n
}

// outputSchema is the schema of an empty job's output: the kept columns
// and the model's outputs, which a model states through OutputSchema.
func (c *Config) outputSchema(in *arrow.Schema) (*arrow.Schema, error) {
	m, ok := c.Model.(device.OutputSchemaer)
	if !ok {
		return nil, errors.New("job: the input has no rows and the model does not state its output schema")
	}
	var fields []arrow.Field
	for _, k := range c.kept() {
		fields = append(fields, in.Field(in.FieldIndices(k)[0]))
	}
	return arrow.NewSchema(append(fields, m.OutputSchema().Fields()...), nil), nil
}

// fingerprint identifies the job's inputs, model and settings.
func (c *Config) fingerprint(ctx context.Context, files []string) (string, error) {
	type input struct {
		Path    string
		Size    int64
		ModTime time.Time
		ETag    string `json:",omitempty"` // an object's
	}
	desc := struct {
		Inputs                 []input
		Model                  string
		InputSize              int
		Feature                string
		Gather, Keep           []string
		Batch, PartRows, Shard string
		SetAside               bool
		TypeIDs                string `json:",omitempty"`
		Units                  bool   `json:",omitempty"`
	}{Units: c.shared, SetAside: c.SetAside != "", Model: c.ModelID, InputSize: c.InputSize, Feature: c.FeatureColumn, Gather: c.Gather, Keep: c.kept(), TypeIDs: c.TypeIDsColumn,
		Batch: fmt.Sprint(c.BatchSize), PartRows: fmt.Sprint(c.PartRows), Shard: c.Shard.String()}
	// Objects are pinned side by side (a round trip each): the reads
	// that follow see these versions or fail.
	pins := make([]storage.Info, len(files))
	var g errgroup.Group
	g.SetLimit(16)
	for i, f := range files {
		if storage.IsURL(f) {
			g.Go(func() (err error) {
				pins[i], err = c.store.Pin(ctx, f)
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return "", fmt.Errorf("job: %w", err)
	}
	for i, f := range files {
		if storage.IsURL(f) {
			desc.Inputs = append(desc.Inputs, input{Path: f, Size: pins[i].Size, ETag: pins[i].ETag})
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("job: %w", err)
		}
		abs, _ := filepath.Abs(f)
		desc.Inputs = append(desc.Inputs, input{Path: abs, Size: st.Size(), ModTime: st.ModTime().UTC()})
	}
	b, err := json.Marshal(desc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// removeStrayTemps removes the temporary output files a killed merge left
// (an upload that did not complete leaves no object).
func removeStrayTemps(output string) {
	if storage.IsURL(output) {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(output), "."+filepath.Base(output)+".tmp-*"))
	for _, m := range matches {
		os.Remove(m)
	}
}
