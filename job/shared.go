package job

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// A shared output folder: the units of one job, written by any number of
// processes, each unit committed once by a conditional write.
//
// There is no folder lock: a unit's file is its own lock. Its write is
// conditional on there being none (If-None-Match on an object, a link on
// local disk), so of two processes that run the same unit — a retried pod
// beside a slow one, a retried Beam bundle — the first commit wins and the
// second discards its work. Where a store ignores the condition, the
// second write replaces the first with the same bytes: a unit's output
// depends on nothing but its rows and the job. A run-wide lock would
// serialise the processes the folder is shared by; a unit lock with a
// token would cost a write more a unit and buy nothing the conditional
// commit does not.

// JobName is the file binding a shared output folder to its job: the
// fingerprint, the unit size, and the inputs with their versions.
const JobName = "_job.json"

// unitKey is a unit file's footer key: what the unit holds, checked on
// every rerun before the unit is skipped.
const unitKey = "drainpipe:unit"

var (
	// ErrUnitTaken reports a unit another process committed first: this
	// one's work on it is discarded.
	ErrUnitTaken = errors.New("job: the unit was committed by another process")
)

// jobRecord is JobName's content. Its bytes depend on the job alone.
type jobRecord struct {
	Version     int            `json:"version"`
	Fingerprint string         `json:"fingerprint"`
	UnitRows    int            `json:"unit_rows"`
	Units       int            `json:"units"`
	Inputs      []inputVersion `json:"inputs"`
}

type inputVersion struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	Size    int64  `json:"size"`
}

// unitFooter is a unit file's footer record.
type unitFooter struct {
	Job          string `json:"job"`
	Input        string `json:"input"`
	Version      string `json:"version"`
	FirstRow     int64  `json:"first_row"`
	RowsIn       int64  `json:"rows_in"`
	RowsSetAside int64  `json:"rows_set_aside,omitempty"`
}

// Plan is a job's units over its shared output folder.
type Plan struct {
	Fingerprint string
	Units       []Unit
	// Committed holds the units whose files are in the folder, verified
	// (their job, input version, rows), by name.
	Committed map[string]UnitFile
	record    jobRecord
}

// UnitFile is a committed unit's file.
type UnitFile struct {
	Size         int64 // bytes
	Rows         int64 // rows written
	RowsSetAside int64
}

// Pending returns the units not committed yet, in input order.
func (p *Plan) Pending() []Unit {
	var out []Unit
	for _, u := range p.Units {
		if _, ok := p.Committed[u.Name()]; !ok {
			out = append(out, u)
		}
	}
	return out
}

// PlanUnits plans cfg's job over the shared folder cfg.Output: it cuts
// the inputs into units of cfg.PartRows rows (whole row groups), binds
// the folder to the job (JobName), and finds the units committed by
// earlier runs or other processes. A folder bound to another job — other
// inputs or input versions, model or settings — is refused with
// [ErrChanged], naming the input that changed, unless cfg.Overwrite: then
// its files are removed, _SUCCESS first, and the folder bound anew.
// cfg.Shard takes no part: every process of the job plans the same units.
func PlanUnits(ctx context.Context, cfg Config) (*Plan, error) {
	if !IsFolder(cfg.Output) {
		return nil, fmt.Errorf("job: a shared output is a folder (a trailing /), not %s", cfg.Output)
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	cfg.openStore()
	defer cfg.store.Close()
	f := folder{store: cfg.store, dir: cfg.Output}
	files, err := fileset.ExpandContext(ctx, cfg.Inputs, fileset.WithOpener(cfg.store))
	if err != nil {
		return nil, err
	}
	if err := checkNotInput(cfg.Output, layout{dir: cfg.Output}, files); err != nil {
		return nil, err
	}
	units, err := planUnits(ctx, cfg.store, files, int64(cfg.PartRows))
	if err != nil {
		return nil, err
	}
	cfg.Shard, cfg.shared = fileset.Shard{Index: 0, Count: 1}, true
	fp, err := cfg.fingerprint(ctx, files)
	if err != nil {
		return nil, err
	}
	p := &Plan{Fingerprint: fp, Units: units, record: jobRecord{Version: 1, Fingerprint: fp, UnitRows: cfg.PartRows, Units: len(units)}}
	for i := range p.Units {
		p.Units[i].Job = fp
		if u := p.Units[i]; i == 0 || u.File != p.Units[i-1].File {
			p.record.Inputs = append(p.record.Inputs, inputVersion{Path: u.Input, Version: u.Version, Size: u.Size})
		}
	}
	if err := f.bind(ctx, p.record, cfg.Overwrite); err != nil {
		return nil, err
	}
	if p.Committed, err = f.committed(ctx, p.Units); err != nil {
		return nil, err
	}
	return p, nil
}

// WriteUnit predicts unit u of a plan into its file of the shared folder
// cfg.Output, committed only if no other process committed it first
// ([ErrUnitTaken] then: this run's work is discarded). In SetAside mode,
// cfg.SetAside is a folder, and the unit's rows set aside go to a file of
// the unit's name there. cfg.Inputs, Shard, Overwrite and Pinned are the
// unit's own.
func WriteUnit(ctx context.Context, cfg Config, u Unit) (*Summary, error) {
	if !IsFolder(cfg.Output) {
		return nil, fmt.Errorf("job: a shared output is a folder (a trailing /), not %s", cfg.Output)
	}
	name := storage.Join(cfg.Output, u.Name())
	cfg.Inputs, cfg.Output, cfg.Overwrite, cfg.Resume = []string{u.Input}, name, false, false
	cfg.Shard, cfg.unit = fileset.Shard{Index: 0, Count: 1}, &u
	cfg.Pinned = nil
	if storage.IsURL(u.Input) {
		cfg.Pinned = map[string]storage.Info{u.Input: {Size: u.Size, ETag: u.Version}}
	}
	if cfg.SetAside != "" {
		cfg.SetAside = storage.Join(cfg.SetAside, u.Name())
	}
	taken := func() bool {
		store := storage.NewOpener()
		defer store.Close()
		_, err := store.Stat(ctx, name)
		return err == nil
	}
	if taken() {
		return nil, fmt.Errorf("%w: %s", ErrUnitTaken, u)
	}
	sum, err := WriteFile(ctx, cfg)
	// A commit refused because the file is there, or cut short by a
	// sealer aborting the uploads of units committed already: another
	// process won.
	if err != nil && (errors.Is(err, sink.ErrExists) || ctx.Err() == nil && taken()) {
		return nil, fmt.Errorf("%w: %s", ErrUnitTaken, u)
	}
	if err != nil {
		return nil, fmt.Errorf("job: unit %s: %w", u, err)
	}
	if u.Rows >= 0 && sum.RowsIn != u.Rows {
		return nil, fmt.Errorf("%w: unit %s: read %d rows, its metadata declares %d", ErrRowsLost, u, sum.RowsIn, u.Rows)
	}
	return sum, nil
}

// footer returns the unit file footer record of a run of unit u.
func (c *Config) footer(read, setAside int64) (string, error) {
	u := c.unit
	data, err := json.Marshal(unitFooter{Job: u.Job, Input: u.Input, Version: u.Version, FirstRow: u.FirstRow, RowsIn: read, RowsSetAside: setAside})
	return string(data), err
}

// Seal finishes a shared folder once every unit of plan is committed:
// it checks each unit's file, writes the manifest (units in input order)
// and _SUCCESS, and aborts the uploads of units that lost their race. It
// returns the units not committed yet (nothing is written then). Any
// process may seal: its manifest's bytes are every other's, and _SUCCESS
// is written If-None-Match.
func Seal(ctx context.Context, cfg Config, plan *Plan) (pending int, err error) {
	store := storage.NewOpener()
	defer store.Close()
	f := folder{store: store, dir: cfg.Output}
	if _, err := store.Stat(ctx, f.path(successName)); err == nil {
		return 0, nil
	}
	committed, err := f.committed(ctx, plan.Units)
	if err != nil {
		return 0, err
	}
	plan.Committed = committed
	if pending = len(plan.Units) - len(committed); pending > 0 {
		return pending, nil
	}
	if err := f.seal(ctx, plan); err != nil {
		return 0, err
	}
	return 0, nil
}

// rows returns the rows the committed units hold, and set aside.
func (p *Plan) rows() (rows, setAside int64) {
	for _, u := range p.Units {
		c := p.Committed[u.Name()]
		rows += c.Rows
		setAside += c.RowsSetAside
	}
	return rows, setAside
}

// UnitManifest is a sealed shared folder's manifest (_manifest.json):
// the units in input order, as every output folder's manifest lists its
// parts. Its bytes depend on the job alone.
type UnitManifest struct {
	Version      int            `json:"version"`
	Fingerprint  string         `json:"fingerprint"`
	UnitRows     int            `json:"unit_rows"`
	Rows         int64          `json:"rows"`
	RowsSetAside int64          `json:"rows_set_aside,omitempty"`
	Parts        []ManifestUnit `json:"parts"`
}

// ManifestUnit is one unit's file in a UnitManifest.
type ManifestUnit struct {
	storage.ManifestPart
	Size         int64  `json:"size"`
	Input        string `json:"input"`
	FirstRow     int64  `json:"first_row"`
	RowsSetAside int64  `json:"rows_set_aside,omitempty"`
}

// manifestOf is the sealed folder's manifest.
func manifestOf(p *Plan) ([]byte, error) {
	doc := UnitManifest{Version: 1, Fingerprint: p.Fingerprint, UnitRows: p.record.UnitRows}
	doc.Rows, doc.RowsSetAside = p.rows()
	units := slices.Clone(p.Units)
	slices.SortFunc(units, func(a, b Unit) int { return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.FirstRow, b.FirstRow)) })
	for _, u := range units {
		c := p.Committed[u.Name()]
		doc.Parts = append(doc.Parts, ManifestUnit{ManifestPart: storage.ManifestPart{File: u.Name(), Rows: c.Rows}, Size: c.Size,
			Input: u.Input, FirstRow: u.FirstRow, RowsSetAside: c.RowsSetAside})
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	return append(data, '\n'), err
}
