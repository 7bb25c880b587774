package job

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	"golang.org/x/sync/errgroup"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/storage"
)

// Unit is one unit of work of a job whose output folder any number of
// processes share ([RunUnits], the Beam transform): a fixed range of one
// pinned input's rows, whole row groups of a Parquet file (a file of
// another format is one unit). Its name and its output depend on the
// inputs and the settings alone — never on how many processes run, which
// one runs it, or how often — so a rerun with any other number resumes
// the folder and writes the same bytes. Its fields are names and
// numbers, so it travels to a Beam worker as it is.
type Unit struct {
	Input string // the input file, a path or URL
	File  int    // its place among the inputs, sorted
	// Group and Groups are the row groups [Group, Group+Groups) of a
	// Parquet input; Groups 0 reads the whole file.
	Group, Groups int
	FirstRow      int64 // the file row of the unit's first row
	Rows          int64 // rows the file's metadata declares; -1 if unknown
	// Version and Size pin the input as planned: an object's ETag, or a
	// local file's modification time. Every unit of an input reads that
	// version or fails with storage.ErrChanged.
	Version string
	Size    int64
	// Job is the fingerprint of the job (inputs and their versions,
	// model, settings) the unit belongs to; its file carries it.
	Job string
}

// Name is the unit's file name in the output folder: input order sorts
// by name, and every attempt writes the same name.
func (u Unit) Name() string { return fmt.Sprintf("part-%05d-%012d.parquet", u.File, u.FirstRow) }

// String names the unit in errors and logs.
func (u Unit) String() string {
	if u.Groups == 0 {
		return u.Input
	}
	return fmt.Sprintf("%s (rows %d to %d, row groups %d to %d)", u.Input, u.FirstRow, u.FirstRow+u.Rows, u.Group, u.Group+u.Groups)
}

// isUnitFile reports whether name is a unit's file, as Name makes them.
func isUnitFile(name string) bool { return unitFile.MatchString(name) }

var unitFile = regexp.MustCompile(`^part-[0-9]{5,}-[0-9]{12,}\.parquet$`)

// planUnits cuts each file into units of whole row groups, each group
// joining the unit before it until that unit holds unitRows rows: the
// cut depends on the files' row groups alone. Objects are pinned by the
// store (side by side: a round trip each).
func planUnits(ctx context.Context, store *storage.Opener, files []string, unitRows int64) ([]Unit, error) {
	plans := make([][]Unit, len(files))
	var g errgroup.Group
	g.SetLimit(planners(files))
	for f, path := range files {
		g.Go(func() error {
			var err error
			plans[f], err = planFile(ctx, store, f, path, unitRows)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var units []Unit
	for _, p := range plans {
		units = append(units, p...)
	}
	return units, nil
}

// planners is how many inputs are planned at once: objects side by side,
// local files one at a time.
func planners(files []string) int {
	for _, f := range files {
		if storage.IsURL(f) {
			return 16
		}
	}
	return 1
}

func planFile(ctx context.Context, store *storage.Opener, f int, path string, unitRows int64) ([]Unit, error) {
	whole := Unit{Input: path, File: f, Rows: -1}
	if storage.IsURL(path) {
		pin, err := store.Pin(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("job: %w", err)
		}
		whole.Version, whole.Size = pin.ETag, pin.Size
	} else {
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("job: %w", err)
		}
		whole.Version, whole.Size = st.ModTime().UTC().Format(time.RFC3339Nano), st.Size()
	}
	if fm, err := format.Of(path); err != nil {
		return nil, err
	} else if fm != format.Parquet {
		return []Unit{whole}, nil
	}
	groups, err := rowGroups(ctx, store, path)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		whole.Rows = 0
		return []Unit{whole}, nil
	}
	var units []Unit
	var at int64
	for g, n := range groups {
		if len(units) == 0 || units[len(units)-1].Rows >= unitRows {
			u := whole
			u.Group, u.FirstRow, u.Rows = g, at, 0
			units = append(units, u)
		}
		last := &units[len(units)-1]
		last.Groups++
		last.Rows += n
		at += n
	}
	return units, nil
}

// rowGroups returns the rows of each row group of a Parquet file, from
// its footer, read at the version the store pinned.
func rowGroups(ctx context.Context, store *storage.Opener, path string) ([]int64, error) {
	f, err := store.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	r, err := file.NewParquetReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("job: %s: %w: %w", path, fileset.ErrUnreadable, err)
	}
	defer r.Close()
	groups := make([]int64, r.NumRowGroups())
	for g := range groups {
		groups[g] = r.MetaData().RowGroup(g).NumRows()
	}
	return groups, nil
}
