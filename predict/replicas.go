package predict

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
)

// replicas is the device side of a run: one session per replica.
type replicas struct {
	sessions []device.Session
	mem      memory.Allocator
}

// startReplicas starts one session per replica. If one fails to start, the
// ones already started are shut down.
func (p *Predictor) startReplicas(ctx context.Context, cfg device.SessionConfig) (*replicas, error) {
	n := p.cfg.replicas
	r := &replicas{mem: cfg.Allocator}
	for i := range n {
		cfg.Replica = i
		var s device.Session
		err := protect("model start", func() (err error) {
			s, err = p.model.Start(ctx, cfg)
			return err
		})
		if err == nil && s == nil {
			err = errors.New("model returned a nil session")
		}
		if err != nil {
			err = fmt.Errorf("predict: start session: %w", replicaError(n, i, err))
			return nil, errors.Join(err, r.shutdown(ctx))
		}
		r.sessions = append(r.sessions, s)
	}
	return r, nil
}

// shutdown shuts every session down once, with a context that is not
// cancelled, and joins their errors.
func (r *replicas) shutdown(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	for i, s := range r.sessions {
		if err := protect("model shutdown", func() error { return s.Shutdown(ctx) }); err != nil {
			errs = append(errs, fmt.Errorf("predict: shutdown session: %w", replicaError(len(r.sessions), i, err)))
		}
	}
	r.sessions = nil
	return errors.Join(errs...)
}

// predict runs one padded global batch: whole on a single replica, or
// split into per-replica slices run concurrently. A failing replica cancels
// the others. It returns one output row per batch row, in order.
func (r *replicas) predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	size := int(b.Record.NumRows())
	if len(r.sessions) == 1 {
		return predictOne(ctx, r.sessions[0], b, size)
	}
	n := len(r.sessions)
	per := size / n
	outs := make([]arrow.RecordBatch, n)
	g, gctx := errgroup.WithContext(ctx)
	for i, s := range r.sessions {
		g.Go(func() error {
			slice := b.Record.NewSlice(int64(i*per), int64((i+1)*per))
			defer slice.Release()
			real := min(max(b.Rows()-i*per, 0), per)
			out, err := predictOne(gctx, s, device.Batch{Index: b.Index, Record: slice, Padding: per - real}, per)
			if err != nil {
				return replicaError(n, i, shiftRow(err, int64(i*per)))
			}
			outs[i] = out
			return nil
		})
	}
	err := g.Wait()
	defer func() {
		for _, o := range outs {
			if o != nil {
				o.Release()
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	return concatRecords(r.mem, outs)
}

// predictOne runs one session on one batch and checks the row count.
func predictOne(ctx context.Context, s device.Session, b device.Batch, want int) (arrow.RecordBatch, error) {
	var out arrow.RecordBatch
	err := protect("model predict", func() (err error) {
		out, err = s.Predict(ctx, b)
		return err
	})
	if err != nil {
		return nil, err
	}
	if got := int(out.NumRows()); got != want {
		out.Release()
		return nil, fmt.Errorf("%w: got %d, want %d", ErrRowCount, got, want)
	}
	return out, nil
}

// concatRecords joins the replicas' outputs end to end.
func concatRecords(mem memory.Allocator, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	schema := recs[0].Schema()
	for i, r := range recs {
		if !r.Schema().Equal(schema) {
			return nil, fmt.Errorf("%w: replica 0 gave %s, replica %d %s", ErrOutputSchema, schema, i, r.Schema())
		}
	}
	out, err := dataset.Concat(mem, schema, recs)
	if err != nil {
		return nil, fmt.Errorf("predict: join replica outputs: %w", err)
	}
	return out, nil
}

func replicaError(n, i int, err error) error {
	if n == 1 {
		return err
	}
	return fmt.Errorf("replica %d of %d: %w", i, n, err)
}
