package job

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/parquet/file"
	"golang.org/x/sync/errgroup"

	"github.com/drainpipe/drainpipe/storage"
)

// folder is a shared output folder's files.
type folder struct {
	store *storage.Opener
	dir   string
}

func (f folder) path(name string) string { return storage.Join(f.dir, name) }

// read returns a file of the folder and, for an object, its version.
func (f folder) read(ctx context.Context, name string) ([]byte, storage.Version, error) {
	if storage.IsURL(f.dir) {
		return f.store.ReadVersion(ctx, f.path(name))
	}
	data, err := f.store.ReadFile(ctx, f.path(name))
	return data, storage.Version{}, err
}

// bind makes the folder the job's: JobName is written if there is none
// (If-None-Match: of processes binding at once, one writes, the others
// read it), kept if it names this job, and replaced — the other job's
// files removed first — only with overwrite.
func (f folder) bind(ctx context.Context, rec jobRecord, overwrite bool) error {
	want, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	want = append(want, '\n')
	if err := storage.MkdirAll(f.dir); err != nil {
		return fmt.Errorf("job: output folder: %w", err)
	}
	for range 4 {
		data, v, err := f.read(ctx, JobName)
		if errors.Is(err, storage.ErrNotFound) {
			bound, err := f.checkUnbound(ctx, overwrite)
			if err != nil {
				return err
			}
			if bound {
				continue // another process bound it since: read what it wrote
			}
			err = f.store.WriteFile(ctx, f.path(JobName), want, false)
			if errors.Is(err, storage.ErrExists) {
				continue // another process bound it: read what it wrote
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("job: %w", err)
		}
		var got jobRecord
		if json.Unmarshal(data, &got) == nil && got.Fingerprint == rec.Fingerprint {
			return nil
		}
		if !overwrite {
			return changed(JobName, got, rec)
		}
		if err := f.clear(ctx); err != nil {
			return err
		}
		if storage.IsURL(f.dir) {
			err = f.store.ReplaceFile(ctx, f.path(JobName), want, v)
		} else {
			err = f.store.WriteFile(ctx, f.path(JobName), want, true)
		}
		if errors.Is(err, storage.ErrChanged) {
			continue // another process rebound it first
		}
		return err
	}
	return fmt.Errorf("job: %s: bound anew by other processes while this one read it", f.path(JobName))
}

// changed explains why the folder's job is not this one: an input that
// changed, or else the model or settings.
func changed(name string, got, want jobRecord) error {
	was := map[string]inputVersion{}
	for _, in := range got.Inputs {
		was[in.Path] = in
	}
	for _, in := range want.Inputs {
		old, ok := was[in.Path]
		switch {
		case !ok:
			return fmt.Errorf("%w: %s is an input %s does not name (--overwrite replaces that job's output)", ErrChanged, in.Path, name)
		case old != in:
			return fmt.Errorf("%w: %s was replaced: %s names version %q of %d bytes, it is now %q of %d bytes (--overwrite replaces that job's output)",
				ErrChanged, in.Path, name, old.Version, old.Size, in.Version, in.Size)
		}
	}
	if len(got.Inputs) != len(want.Inputs) {
		return fmt.Errorf("%w: %s names %d inputs, this job has %d (--overwrite replaces that job's output)", ErrChanged, name, len(got.Inputs), len(want.Inputs))
	}
	return fmt.Errorf("%w: %s is another job's: the same inputs, another model or other settings (--overwrite replaces that job's output)", ErrChanged, name)
}

// checkUnbound checks a folder with no JobName: empty, or holding
// another drainpipe layout's output (a single run's), which only
// overwrite clears; never files drainpipe did not write. It reports a
// folder that another process bound since JobName was read.
func (f folder) checkUnbound(ctx context.Context, overwrite bool) (bound bool, err error) {
	entries, err := f.store.List(ctx, f.dir)
	if err != nil {
		return false, fmt.Errorf("job: %w", err)
	}
	var ours int
	for _, e := range entries {
		switch {
		case e.Name == JobName:
			return true, nil
		case strings.HasPrefix(e.Name, "."):
		case drainpipeFile(e.Name):
			ours++
		default:
			return false, fmt.Errorf("%w: %s holds %s, which no drainpipe run wrote", ErrNotOutput, f.dir, e.Name)
		}
	}
	if ours == 0 {
		return false, nil
	}
	if !overwrite {
		return false, fmt.Errorf("%w: %s holds another run's output (%d files)", ErrOutputExists, f.dir, ours)
	}
	return false, f.clear(ctx)
}

// drainpipeFile reports whether a folder's file is one a drainpipe job
// writes: a part or unit, a manifest, the marker, the job record.
func drainpipeFile(name string) bool {
	return strings.HasPrefix(name, "part-") || name == folderManifestName || name == successName || name == JobName
}

// clear removes a job's files, _SUCCESS first (no reader takes a folder
// half cleared for complete), the job record last.
func (f folder) clear(ctx context.Context) error {
	entries, err := f.store.List(ctx, f.dir)
	if err != nil {
		return fmt.Errorf("job: %w", err)
	}
	order := func(name string) int {
		switch name {
		case successName:
			return 0
		case folderManifestName:
			return 1
		case JobName:
			return 3
		}
		return 2
	}
	slices.SortFunc(entries, func(a, b storage.Entry) int { return cmp.Compare(order(a.Name), order(b.Name)) })
	for _, e := range entries {
		if drainpipeFile(e.Name) && e.Name != JobName {
			if err := f.store.Remove(ctx, f.path(e.Name)); err != nil {
				return fmt.Errorf("job: clear %s: %w", f.dir, err)
			}
		}
	}
	return nil
}

// committed lists the folder and checks the footer of every unit file in
// it: the job, the input version, the unit's first row and rows. A file
// that fails is ErrPartsDamaged, never a unit skipped.
func (f folder) committed(ctx context.Context, units []Unit) (map[string]UnitFile, error) {
	entries, err := f.store.List(ctx, f.dir)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	sizes := make(map[string]int64, len(entries))
	for _, e := range entries {
		if !strings.HasPrefix(e.Name, ".") && !drainpipeFile(e.Name) {
			return nil, fmt.Errorf("%w: %s holds %s, which no drainpipe run wrote", ErrNotOutput, f.dir, e.Name)
		}
		sizes[e.Name] = e.Size
	}
	found := make([]*UnitFile, len(units))
	var g errgroup.Group
	g.SetLimit(planners([]string{f.dir}) * 2)
	for i, u := range units {
		size, ok := sizes[u.Name()]
		if !ok {
			continue
		}
		g.Go(func() error {
			c, err := f.verify(ctx, u)
			if err == nil {
				c.Size = size
				found[i] = &c
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[string]UnitFile)
	for i, c := range found {
		if c != nil {
			out[units[i].Name()] = *c
		}
	}
	return out, nil
}

// verify reads a unit file's footer and checks it holds unit u of the job.
func (f folder) verify(ctx context.Context, u Unit) (UnitFile, error) {
	name := f.path(u.Name())
	damaged := func(format string, args ...any) (UnitFile, error) {
		return UnitFile{}, fmt.Errorf("%w: %s: %s", ErrPartsDamaged, name, fmt.Sprintf(format, args...))
	}
	in, err := f.store.Open(ctx, name)
	if err != nil {
		return UnitFile{}, fmt.Errorf("job: %w", err)
	}
	r, err := file.NewParquetReader(in)
	if err != nil {
		in.Close()
		return damaged("%v", err)
	}
	defer r.Close()
	value := r.MetaData().KeyValueMetadata().FindValue(unitKey)
	var ft unitFooter
	if value == nil || json.Unmarshal([]byte(*value), &ft) != nil {
		return damaged("no unit record in its footer")
	}
	rows := r.NumRows()
	switch {
	case ft.Job != u.Job:
		return damaged("written by another job")
	case ft.Input != u.Input || ft.Version != u.Version || ft.FirstRow != u.FirstRow:
		return damaged("holds rows of %s version %q from row %d, not of the unit", ft.Input, ft.Version, ft.FirstRow)
	case u.Rows >= 0 && ft.RowsIn != u.Rows:
		return damaged("holds %d input rows, the unit has %d", ft.RowsIn, u.Rows)
	case rows+ft.RowsSetAside != ft.RowsIn:
		return damaged("holds %d rows and %d set aside of %d", rows, ft.RowsSetAside, ft.RowsIn)
	}
	return UnitFile{Rows: rows, RowsSetAside: ft.RowsSetAside}, nil
}

// seal writes the manifest and _SUCCESS of a folder whose every unit is
// committed, and tidies what lost races and kills left: uploads of
// committed units, a local write's temporary files.
func (f folder) seal(ctx context.Context, p *Plan) error {
	man, err := manifestOf(p)
	if err != nil {
		return err
	}
	if err := f.store.WriteFile(ctx, f.path(folderManifestName), man, true); err != nil {
		return fmt.Errorf("job: manifest: %w", err)
	}
	if storage.IsURL(f.dir) {
		names := []string{storage.Join(f.dir, "")}
		for _, u := range p.Units {
			names = append(names, f.path(u.Name()))
		}
		if _, err := f.store.AbortUploads(ctx, names...); err != nil {
			return fmt.Errorf("job: abort the uploads of units committed already: %w", err)
		}
	} else if entries, err := f.store.List(ctx, f.dir); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name, ".part-") {
				f.store.Remove(ctx, f.path(e.Name))
			}
		}
	}
	rows, _ := p.rows()
	done := storage.Success{Rows: rows, Parts: len(p.Units)}.Marshal()
	err = f.store.WriteFile(ctx, f.path(successName), done, false)
	if errors.Is(err, storage.ErrExists) {
		// Another process sealed it: the same marker, or a folder that is
		// not this job's.
		if got, rerr := f.store.ReadFile(ctx, f.path(successName)); rerr == nil && bytes.Equal(got, done) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("job: %s: %w", successName, err)
	}
	return nil
}
