package dpbeam

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/storage"
)

// ErrRowsLost reports units whose rows written differ from the rows their
// inputs declare: the pipeline's output is not complete.
var ErrRowsLost = job.ErrRowsLost

// Config describes a Beam prediction job. It travels to the workers as
// part of the pipeline, so it holds names and numbers only.
type Config struct {
	Inputs []string // files or glob patterns, as the workers see them
	Model  string   // the model file, a path or URL as the workers see it
	Loader string   // a loader registered with RegisterLoader; "" for .dpmlp
	// Output is the output folder, a path or URL (s3://bucket/preds/):
	// one Parquet file a unit, a manifest, _SUCCESS.
	Output string

	FeatureColumn string // the tensor column the model reads; "" for the model's
	// Features, if set, gathers the scalar columns matching these patterns
	// (path.Match syntax, such as "f*") into the feature column.
	Features  []string
	Keep      []string // input columns written next to the predictions
	BatchSize int      // rows a batch (default 256)
	// PartRows is the rows a unit of work aims at (default 1<<18): whole
	// row groups of one Parquet file, each joining the unit before it
	// until that unit holds PartRows rows (job.Unit). The units depend on
	// the inputs and PartRows alone, not on the runner's parallelism.
	PartRows int

	// Overwrite replaces another job's output in Output (job.PlanUnits).
	// Without it, a folder bound to another job (other inputs or input
	// versions, model or settings) is refused with job.ErrChanged; a rerun
	// of the same job resumes, skipping the units committed. A folder
	// holding files no run wrote is refused either way.
	Overwrite bool

	// SetAside, if set, is a folder (a path or URL) where each unit writes
	// the rows it cannot predict, a file named as its output file, with
	// their keys, source file, file row, column and reason, and goes on
	// (job.Config.SetAside). Empty: such a row fails its unit.
	SetAside string
	// ReadRows, CSVSample and MaxMemory are how a unit reads its input
	// (job.Config's); 0 keeps the defaults.
	ReadRows  int
	CSVSample int
	MaxMemory int64
}

// Result is one unit's outcome.
type Result struct {
	Unit job.Unit
	File string // output file name in the output folder
	Rows int64  // rows written
	// RowsSetAside is the rows written to the file of the same name in
	// the SetAside folder.
	RowsSetAside int64
	// Taken reports a unit another attempt committed first (a bundle the
	// runner ran twice): this attempt's work was discarded.
	Taken bool
	// WallNanos is the unit's job, SessionStartNanos the part of it spent
	// starting its device sessions.
	WallNanos, SessionStartNanos int64
}

// ManifestName and SuccessName are the files the last step writes: the
// layout of the CLI's folder outputs (storage.ManifestName, SuccessName).
const (
	ManifestName = storage.ManifestName
	SuccessName  = storage.SuccessName
)

func init() {
	beam.RegisterType(reflect.TypeFor[job.Unit]())
	beam.RegisterType(reflect.TypeFor[Result]())
	register.DoFn3x1[context.Context, []byte, func(job.Unit), error](&planFn{})
	register.DoFn3x1[context.Context, job.Unit, func(Result), error](&predictFn{})
	register.DoFn3x1[context.Context, []byte, func(*Result) bool, error](&sealFn{})
	register.Emitter1[job.Unit]()
	register.Emitter1[Result]()
	register.Iter1[Result]()
}

// Predict adds the job to the pipeline: it plans the inputs' units and
// binds the output folder to the job (a rerun of the same job skips the
// units committed), spreads the rest across workers, predicts each into
// its own Parquet file of the output folder (keys and predictions, one
// row an input row, committed once), and seals the folder — manifest and
// _SUCCESS — once every unit is committed. It returns the units written.
func Predict(s beam.Scope, cfg Config) beam.PCollection {
	s = s.Scope("drainpipe.Predict")
	cfg = cfg.withDefaults()
	units := beam.ParDo(s, &planFn{Cfg: cfg}, beam.Impulse(s))
	results := beam.ParDo(s, &predictFn{Cfg: cfg}, beam.Reshuffle(s, units))
	// Sealing waits for every result (a side input is whole before its
	// step runs), and runs when no unit was left to write.
	beam.ParDo0(s, &sealFn{Cfg: cfg}, beam.Impulse(s), beam.SideInput{Input: results})
	return results
}

// withDefaults fills in the batch and unit sizes and makes the folders'
// names end in their separator.
func (cfg Config) withDefaults() Config {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.PartRows <= 0 {
		cfg.PartRows = 1 << 18
	}
	cfg.Output = asFolder(cfg.Output)
	if cfg.SetAside != "" {
		cfg.SetAside = asFolder(cfg.SetAside)
	}
	return cfg
}

// asFolder makes a folder's path or URL end in its separator.
func asFolder(dir string) string {
	if storage.IsFolder(dir) || strings.HasSuffix(dir, "/") {
		return dir
	}
	return dir + "/"
}

// The DoFns that need the model (its digest is in the job's fingerprint)
// hold it from Setup to Teardown. Beam encodes a DoFn by its exported
// fields: each has its own Cfg.

func setup(cfg Config) (*handle, error) { return acquire(cfg.Loader, cfg.Model) }

func teardown(cfg Config, h **handle) {
	if *h != nil {
		release(cfg.Loader, cfg.Model)
		*h = nil
	}
}

// coreJob is the core's job for the pipeline, with model m.
func coreJob(cfg Config, h *handle, m device.Model) job.Config {
	return job.Config{
		Inputs: cfg.Inputs, Output: cfg.Output, Overwrite: cfg.Overwrite,
		Model: m, ModelID: h.id, InputSize: h.model.InputSize,
		FeatureColumn: cmp.Or(cfg.FeatureColumn, h.model.Feature), Gather: cfg.Features, Keep: cfg.Keep,
		BatchSize: cfg.BatchSize, PartRows: cfg.PartRows,
		ReadRows: cfg.ReadRows, CSVSample: cfg.CSVSample, MaxMemory: cfg.MaxMemory, SetAside: cfg.SetAside,
	}
}

// planFn plans the units and binds the folder, on a worker: the files are
// the workers'. It emits the units not committed yet.
type planFn struct {
	Cfg Config
	h   *handle
}

func (f *planFn) Setup() (err error) { f.h, err = setup(f.Cfg); return err }
func (f *planFn) Teardown()          { teardown(f.Cfg, &f.h) }

func (f *planFn) ProcessElement(ctx context.Context, _ []byte, emit func(job.Unit)) error {
	plan, err := job.PlanUnits(ctx, coreJob(f.Cfg, f.h, f.h.model.Device))
	if err != nil {
		return fmt.Errorf("dpbeam: %w", err)
	}
	if f.Cfg.SetAside != "" {
		if err := clearAsides(ctx, f.Cfg.SetAside, plan); err != nil {
			return err
		}
	}
	pending := plan.Pending()
	if len(plan.Committed) > 0 {
		slog.Info("drainpipe: resuming", "output", f.Cfg.Output, "units", len(plan.Units), "committed", len(plan.Committed))
	}
	for _, u := range pending {
		emit(u)
		if testTwice.Load() {
			emit(u)
		}
	}
	return nil
}

// clearAsides readies the set-aside folder: files of units not committed
// are stale (each unit's is written with it), and are removed; files no
// run wrote are refused.
func clearAsides(ctx context.Context, dir string, plan *job.Plan) error {
	if err := storage.MkdirAll(dir); err != nil {
		return fmt.Errorf("dpbeam: set aside: %w", err)
	}
	store := storage.NewOpener()
	defer store.Close()
	entries, err := store.List(ctx, dir)
	if err != nil {
		return fmt.Errorf("dpbeam: set aside: %w", err)
	}
	for _, e := range entries {
		_, committed := plan.Committed[e.Name]
		switch {
		case strings.HasPrefix(e.Name, "."), committed:
		case strings.HasPrefix(e.Name, "part-"):
			if err := store.Remove(ctx, storage.Join(dir, e.Name)); err != nil {
				return fmt.Errorf("dpbeam: set aside: %w", err)
			}
		default:
			return fmt.Errorf("%w: set-aside folder %s holds %s, which no drainpipe run wrote", job.ErrNotOutput, dir, e.Name)
		}
	}
	return nil
}

// testFault, set by tests, fails a unit's attempt before it runs. It is
// atomic: a failed pipeline's other bundles may still be running on
// Prism's workers when Execute returns and the test resets it.
var testFault atomic.Pointer[func(job.Unit) error]

// testTwice, set by tests, plans every unit twice: the attempts a runner
// makes when it retries a bundle it took for lost.
var testTwice atomic.Bool

// predictFn runs the core's job on one unit, into its own file.
type predictFn struct {
	Cfg Config
	h   *handle
}

func (f *predictFn) Setup() (err error) { f.h, err = setup(f.Cfg); return err }
func (f *predictFn) Teardown()          { teardown(f.Cfg, &f.h) }

func (f *predictFn) ProcessElement(ctx context.Context, u job.Unit, emit func(Result)) error {
	if fault := testFault.Load(); fault != nil {
		if err := (*fault)(u); err != nil {
			return err
		}
	}
	timed := &timedModel{Model: f.h.model.Device}
	cfg := coreJob(f.Cfg, f.h, timed)
	cfg.Logger = slog.Default().With("unit", u.Name())
	sum, err := job.WriteUnit(ctx, cfg, u)
	if errors.Is(err, job.ErrUnitTaken) {
		// A bundle run twice: the first commit stands.
		emit(Result{Unit: u, File: u.Name(), Taken: true})
		return nil
	}
	if err != nil {
		return fmt.Errorf("dpbeam: %w", err)
	}
	emit(Result{Unit: u, File: u.Name(), Rows: sum.Rows, RowsSetAside: sum.RowsSetAside, WallNanos: int64(sum.Wall),
		SessionStartNanos: timed.starting.Load()})
	return nil
}

// sealFn writes the manifest and _SUCCESS once every unit is committed.
type sealFn struct {
	Cfg Config
	h   *handle
}

func (f *sealFn) Setup() (err error) { f.h, err = setup(f.Cfg); return err }
func (f *sealFn) Teardown()          { teardown(f.Cfg, &f.h) }

func (f *sealFn) ProcessElement(ctx context.Context, _ []byte, results func(*Result) bool) error {
	var r Result
	var written, taken int
	var wall, start time.Duration
	for results(&r) {
		if r.Taken {
			taken++
			continue
		}
		written++
		wall += time.Duration(r.WallNanos)
		start += time.Duration(r.SessionStartNanos)
	}
	cfg := coreJob(f.Cfg, f.h, f.h.model.Device)
	cfg.Overwrite = false // bound by the plan: never clear it now
	plan, err := job.PlanUnits(ctx, cfg)
	if err != nil {
		return fmt.Errorf("dpbeam: seal: %w", err)
	}
	pending, err := job.Seal(ctx, cfg, plan)
	if err != nil {
		return fmt.Errorf("dpbeam: seal: %w", err)
	}
	if pending > 0 {
		return fmt.Errorf("%w: %d of the %d units of %s are not committed", ErrRowsLost, pending, len(plan.Units), f.Cfg.Output)
	}
	slog.Info("drainpipe: output committed", "output", f.Cfg.Output, "units", len(plan.Units), "written", written,
		"taken", taken, "unit_wall", wall, "session_start", start)
	return nil
}
