package dpbeam

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/storage"
)

// ErrRowsLost reports shards whose rows written differ from the rows their
// inputs declare: the pipeline's output is not complete.
var ErrRowsLost = errors.New("dpbeam: rows lost")

// Config describes a Beam prediction job. It travels to the workers as
// part of the pipeline, so it holds names and numbers only.
type Config struct {
	Inputs []string // files or glob patterns, as the workers see them
	Model  string   // the model file, a path or URL as the workers see it
	Loader string   // a loader registered with RegisterLoader; "" for .dpmlp
	// Output is the output folder, a path or URL (s3://bucket/preds/):
	// one Parquet file a shard, a manifest, _SUCCESS.
	Output string

	FeatureColumn string // the tensor column the model reads; "" for the model's
	// Features, if set, gathers the scalar columns matching these patterns
	// (path.Match syntax, such as "f*") into the feature column.
	Features  []string
	Keep      []string // input columns written next to the predictions
	BatchSize int      // rows a batch (default 256)
	// RowsPerShard is the rows a Parquet shard aims at (default 1<<18):
	// files of many row groups split into several shards.
	RowsPerShard int64

	// Overwrite replaces what an earlier run left in Output (and in
	// SetAside): its shard files, manifest and _SUCCESS are removed before
	// any shard runs. Without it, a folder holding them is refused
	// (job.ErrOutputExists). A folder holding files no run wrote is
	// refused either way.
	Overwrite bool

	// SetAside, if set, is a folder (a path or URL) where each shard writes
	// the rows it cannot predict, a file named as its output file, with
	// their keys, source file, file row, column and reason, and goes on
	// (job.Config.SetAside). Empty: such a row fails its shard.
	SetAside string
	// ReadRows, CSVSample and MaxMemory are how a shard reads its input
	// (job.Config's); 0 keeps the defaults.
	ReadRows  int
	CSVSample int
	MaxMemory int64
}

// Result is one committed shard.
type Result struct {
	Shard Shard
	File  string // output file name in the output folder
	Rows  int64  // rows written
	// RowsSetAside is the rows written to the file of the same name in
	// the SetAside folder.
	RowsSetAside int64
	// WallNanos is the shard's job, SessionStartNanos the part of it spent
	// starting its device sessions.
	WallNanos, SessionStartNanos int64
}

// Manifest is the output folder's _manifest.json, written once every shard
// has committed.
type Manifest struct {
	Inputs []string `json:"inputs"`
	Model  string   `json:"model"`
	Rows   int64    `json:"rows"`
	// SetAside is Config.SetAside and RowsSetAside the rows set aside in
	// it: with Rows, every input row.
	SetAside     string           `json:"set_aside,omitempty"`
	RowsSetAside int64            `json:"rows_set_aside,omitempty"`
	Parts        []ManifestRecord `json:"parts"`
}

// ManifestRecord is one output file of the manifest: its name and rows,
// as every output folder's manifest lists them, and the input shard it
// holds.
type ManifestRecord struct {
	storage.ManifestPart
	Input        string `json:"input"`
	Shard        string `json:"shard"` // "i/n" of the input's row groups
	RowsSetAside int64  `json:"rows_set_aside,omitempty"`
}

// ManifestName and SuccessName are the files the last step writes: the
// layout of the CLI's folder outputs (storage.ManifestName, SuccessName).
const (
	ManifestName = storage.ManifestName
	SuccessName  = storage.SuccessName
)

func init() {
	beam.RegisterType(reflect.TypeFor[Shard]())
	beam.RegisterType(reflect.TypeFor[Result]())
	register.DoFn3x1[context.Context, []byte, func(Shard), error](&expandFn{})
	register.DoFn3x1[context.Context, Shard, func(Result), error](&predictFn{})
	register.DoFn3x1[context.Context, int, func(*Result) bool, error](&manifestFn{})
	register.Emitter1[Shard]()
	register.Emitter1[Result]()
	register.Iter1[Result]()
}

// Predict adds the job to the pipeline: it expands the inputs into shards,
// spreads them across workers, predicts each into its own Parquet file of
// the output folder (keys and predictions, one row an input row), and
// writes the manifest and _SUCCESS once every shard has committed. It
// returns the committed shards.
func Predict(s beam.Scope, cfg Config) beam.PCollection {
	s = s.Scope("drainpipe.Predict")
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.RowsPerShard <= 0 {
		cfg.RowsPerShard = 1 << 18
	}
	shards := beam.ParDo(s, &expandFn{Cfg: cfg}, beam.Impulse(s))
	results := beam.ParDo(s, &predictFn{Cfg: cfg}, beam.Reshuffle(s, shards))
	beam.ParDo0(s, &manifestFn{Cfg: cfg}, beam.GroupByKey(s, beam.AddFixedKey(s, results)))
	return results
}

// expandFn lists the shards, on a worker: the files are the workers'.
type expandFn struct{ Cfg Config }

func (f *expandFn) ProcessElement(ctx context.Context, _ []byte, emit func(Shard)) error {
	if err := storage.MkdirAll(f.Cfg.Output); err != nil {
		return fmt.Errorf("dpbeam: output: %w", err)
	}
	if f.Cfg.SetAside != "" {
		if err := storage.MkdirAll(f.Cfg.SetAside); err != nil {
			return fmt.Errorf("dpbeam: set aside: %w", err)
		}
	}
	store := storage.NewOpener()
	defer store.Close()
	if err := clearFolder(ctx, store, f.Cfg.Output, f.Cfg.Overwrite, "--output"); err != nil {
		return err
	}
	if f.Cfg.SetAside != "" {
		if err := clearFolder(ctx, store, f.Cfg.SetAside, f.Cfg.Overwrite, "--set-aside"); err != nil {
			return err
		}
	}
	shards, err := Expand(ctx, f.Cfg.Inputs, f.Cfg.RowsPerShard)
	if err != nil {
		return err
	}
	for _, sh := range shards {
		emit(sh)
	}
	return nil
}

// clearFolder readies an output folder for a run, as the CLI does: an
// empty or absent folder is used as it is; one holding an earlier run's
// files (shard files, the manifest, _SUCCESS) is cleared of them with
// overwrite — the marker first, so no reader takes a half-cleared folder
// for complete — and refused without, so a rerun never leaves an earlier
// run's shards beside its own; one holding any other file is refused.
func clearFolder(ctx context.Context, store *storage.Opener, dir string, overwrite bool, flag string) error {
	entries, err := store.List(ctx, dir)
	if err != nil {
		return fmt.Errorf("dpbeam: %s: %w", flag, err)
	}
	var earlier []string
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name, "."): // temporary files
		case e.Name == SuccessName || e.Name == ManifestName || isShardFile(e.Name):
			earlier = append(earlier, e.Name)
		default:
			return fmt.Errorf("%w: %s %s holds %s, which no drainpipe run wrote", job.ErrNotOutput, flag, dir, e.Name)
		}
	}
	if len(earlier) == 0 {
		return nil
	}
	if !overwrite {
		return fmt.Errorf("%w: %s %s holds an earlier run's output (%d files): --overwrite replaces it", job.ErrOutputExists, flag, dir, len(earlier))
	}
	slices.SortFunc(earlier, func(a, b string) int { return cmp.Compare(removeOrder(a), removeOrder(b)) })
	for _, name := range earlier {
		if err := store.Remove(ctx, storage.Join(dir, name)); err != nil {
			return fmt.Errorf("dpbeam: %s: %w", flag, err)
		}
	}
	return nil
}

// removeOrder puts the marker first and the manifest second.
func removeOrder(name string) int {
	switch name {
	case SuccessName:
		return 0
	case ManifestName:
		return 1
	}
	return 2
}

// testFault, set by tests, fails a shard's attempt before it runs. It is
// atomic: a failed pipeline's other bundles may still be running on
// Prism's workers when Execute returns and the test resets it.
var testFault atomic.Pointer[func(Shard) error]

// predictFn runs the core's job on one shard, into its own file.
type predictFn struct {
	Cfg Config
	h   *handle
}

func (f *predictFn) Setup() error {
	h, err := acquire(f.Cfg.Loader, f.Cfg.Model)
	f.h = h
	return err
}

func (f *predictFn) Teardown() {
	if f.h != nil {
		release(f.Cfg.Loader, f.Cfg.Model)
		f.h = nil
	}
}

func (f *predictFn) ProcessElement(ctx context.Context, sh Shard, emit func(Result)) error {
	if fault := testFault.Load(); fault != nil {
		if err := (*fault)(sh); err != nil {
			return err
		}
	}
	m := f.h.model
	out := storage.Join(f.Cfg.Output, sh.Name())
	timed := &timedModel{Model: m.Device}
	// Written once, whole or not at all: Beam retries a failed shard
	// whole, and its file's name is its own, so no lock, parts or merge.
	cfg := job.Config{
		Inputs: []string{sh.Path}, Output: out, Overwrite: true,
		Model: timed, ModelID: f.h.id, InputSize: m.InputSize,
		FeatureColumn: cmp.Or(f.Cfg.FeatureColumn, m.Feature), Gather: f.Cfg.Features, Keep: f.Cfg.Keep,
		BatchSize: f.Cfg.BatchSize, Shard: fileset.Shard{Index: sh.Index, Count: sh.Count},
		ReadRows: f.Cfg.ReadRows, CSVSample: f.Cfg.CSVSample, MaxMemory: f.Cfg.MaxMemory,
		Logger: slog.Default().With("shard", sh.Name()),
	}
	if sh.Version != "" {
		cfg.Pinned = map[string]storage.Info{sh.Path: {Size: sh.Size, ETag: sh.Version}}
	}
	if f.Cfg.SetAside != "" {
		cfg.SetAside = storage.Join(f.Cfg.SetAside, sh.Name())
	}
	sum, err := job.WriteFile(ctx, cfg)
	if err != nil {
		return fmt.Errorf("dpbeam: shard %s: %w", sh.describe(), err)
	}
	if sh.Rows >= 0 && sum.Rows+sum.RowsSetAside != sh.Rows {
		return fmt.Errorf("%w: shard %s wrote %d rows and set %d aside, its metadata declares %d", ErrRowsLost, sh.describe(), sum.Rows, sum.RowsSetAside, sh.Rows)
	}
	emit(Result{Shard: sh, File: sh.Name(), Rows: sum.Rows, RowsSetAside: sum.RowsSetAside, WallNanos: int64(sum.Wall),
		SessionStartNanos: timed.starting.Load()})
	return nil
}

// manifestFn writes the manifest and _SUCCESS after every shard.
type manifestFn struct{ Cfg Config }

func (f *manifestFn) ProcessElement(ctx context.Context, _ int, results func(*Result) bool) error {
	man := Manifest{Inputs: f.Cfg.Inputs, Model: f.Cfg.Model, SetAside: f.Cfg.SetAside}
	var r Result
	seen := map[string]bool{}
	var wall, start time.Duration
	for results(&r) {
		if seen[r.File] {
			continue // a retried shard reported twice: its file was rewritten, not added
		}
		seen[r.File] = true
		man.Parts = append(man.Parts, ManifestRecord{ManifestPart: storage.ManifestPart{File: r.File, Rows: r.Rows}, Input: r.Shard.Path,
			Shard: fmt.Sprintf("%d/%d", r.Shard.Index, r.Shard.Count), RowsSetAside: r.RowsSetAside})
		man.Rows += r.Rows
		man.RowsSetAside += r.RowsSetAside
		wall += time.Duration(r.WallNanos)
		start += time.Duration(r.SessionStartNanos)
	}
	slices.SortFunc(man.Parts, func(a, b ManifestRecord) int { return cmp.Compare(a.File, b.File) })
	data, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return err
	}
	store := storage.NewOpener()
	defer store.Close()
	if err := store.WriteFile(ctx, storage.Join(f.Cfg.Output, ManifestName), append(data, '\n'), true); err != nil {
		return fmt.Errorf("dpbeam: manifest: %w", err)
	}
	done := storage.Success{Rows: man.Rows, Parts: len(man.Parts)}.Marshal()
	if err := store.WriteFile(ctx, storage.Join(f.Cfg.Output, SuccessName), done, true); err != nil {
		return fmt.Errorf("dpbeam: %s: %w", SuccessName, err)
	}
	slog.Info("drainpipe: output committed", "output", f.Cfg.Output, "files", len(man.Parts), "rows", man.Rows,
		"shard_wall", wall, "session_start", start)
	return nil
}
