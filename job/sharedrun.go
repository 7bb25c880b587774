package job

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/drainpipe/drainpipe/storage"
)

// RunUnits runs shard cfg.Shard (i of n) of a job whose output folder
// cfg.Output any number of processes share: a Kubernetes Indexed Job, a
// shell loop, a scheduler's array job. It plans the job's units
// ([PlanUnits]), writes those numbered u ≡ i (mod n) that no process
// committed yet ([WriteUnit]), each committed once, and, if every unit of
// the job is then committed, seals the folder ([Seal]): the process that
// commits the last unit writes the manifest and _SUCCESS. A rerun, with
// this or any other n, skips the units committed, so a job killed
// anywhere resumes where it stopped and ends with the bytes an
// uninterrupted single-process run writes.
//
// Summary.Rows counts the rows this process wrote; Units says what it
// did and whether the folder is complete. cfg.Resume and BreakLock do
// not apply: a shared folder always resumes its own job, and has no lock.
func RunUnits(ctx context.Context, cfg Config) (_ *Summary, err error) {
	began := time.Now()
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ctx, span := cfg.startJob(ctx, "units")
	defer func() { endSpan(span, err) }()
	tracer := cfg.tracer()
	plan, err := PlanUnits(ctx, cfg)
	if err != nil {
		return nil, err
	}
	shard := cfg.Shard
	if shard.Count == 0 {
		shard.Count = 1
	}
	us := &UnitsSummary{Total: len(plan.Units)}
	sum := &Summary{Output: cfg.Output, Units: us}
	var mine []Unit
	var total int64
	for k, u := range plan.Units {
		if k%shard.Count != shard.Index {
			continue
		}
		if c, ok := plan.Committed[u.Name()]; ok {
			resumedSpan(ctx, tracer, "unit", unitAttributes(u, c.Rows, c.RowsSetAside, true))
			us.Skipped++
			sum.ResumedRows += c.Rows
			sum.RowsIn += c.Rows + c.RowsSetAside
			continue
		}
		mine = append(mine, u)
		total += max(u.Rows, 0)
	}
	if len(mine) > 0 || us.Skipped > 0 {
		cfg.Logger.Info("units", "shard", shard.String(), "units", len(plan.Units), "to_write", len(mine), "committed_already", us.Skipped)
	}
	progress := cfg.Progress
	var done int64
	for _, u := range mine {
		if progress != nil {
			at := done
			cfg.Progress = func(d, _ int64) { progress(at+d, total) }
		}
		uctx, uspan := tracer.Start(ctx, "unit", trace.WithAttributes(attribute.String("drainpipe.unit.name", u.Name())))
		s, err := WriteUnit(uctx, cfg, u)
		if err == nil {
			uspan.SetAttributes(unitAttributes(u, s.Rows, s.RowsSetAside, false)...)
		}
		uspan.SetAttributes(attribute.Bool("drainpipe.unit.taken", errors.Is(err, ErrUnitTaken)))
		endSpan(uspan, err)
		if errors.Is(err, ErrUnitTaken) {
			us.Taken++
			cfg.Logger.Warn("another process committed this unit first: this one's work on it is discarded", "unit", u.Name())
			continue
		}
		if err != nil {
			return nil, err
		}
		us.Written++
		done += s.RowsIn
		sum.Rows += s.Rows
		sum.RowsIn += s.RowsIn
		sum.RowsSetAside += s.RowsSetAside
		sum.Batches += s.Batches
		sum.PaddedRows += s.PaddedRows
		sum.Parts++
		if cfg.Committed != nil {
			cfg.Committed(u, s)
		}
	}
	sum.Rows += sum.ResumedRows
	if us.Pending, err = Seal(ctx, cfg, plan); err != nil {
		return nil, err
	}
	if us.Pending == 0 {
		store := storage.NewOpener()
		_, serr := store.Stat(ctx, storage.Join(cfg.Output, successName))
		store.Close()
		if serr != nil {
			return nil, fmt.Errorf("job: every unit of %s is committed and %s is missing: %w", cfg.Output, successName, serr)
		}
		us.Sealed = true
	}
	sum.Wall = time.Since(began)
	if s := sum.Wall.Seconds(); s > 0 {
		sum.RowsPerSecond = float64(sum.Rows-sum.ResumedRows) / s
	}
	return sum, nil
}
