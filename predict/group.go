package predict

import (
	"context"
	"errors"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/internal/runner"
	"github.com/drainpipe/drainpipe/pad"
)

// group is one group of device sessions, one per replica (WithReplicas),
// that runs whole padded batches (Triton calls such a group an instance):
// the hooks around each, the model's outputs checked for one row per
// batch row, the passthrough columns put back, the padding rows dropped,
// and a panic of the model or a hook turned into an error. Predict and
// All run WithGroups groups over a dataset; package online runs its own
// over the same Predictor (through internal/runner) for requests that
// arrive one by one.
//
// A group's methods are not safe for concurrent use.
type group struct {
	devices *replicas
	step    step
	stats   Stats
}

func init() {
	runner.StartGroup = func(p any, ctx context.Context, padded *arrow.Schema) (runner.Group, error) {
		return p.(*Predictor).startGroup(ctx, padded, nil)
	}
	runner.Of = func(p any) runner.Settings { return p.(*Predictor).settings() }
}

// startGroup starts a group; with padder, the group bisects a failing
// batch to set its poison rows aside (WithSetAside).
func (p *Predictor) startGroup(ctx context.Context, padded *arrow.Schema, padder *pad.Padder) (*group, error) {
	c := &p.cfg
	keep, err := columnIndices(padded, c.passthrough)
	if err != nil {
		return nil, err
	}
	devices, err := p.startReplicas(ctx, device.SessionConfig{BatchSize: c.batchSize / c.replicas, BatchSizes: c.perReplicaSizes(),
		Replicas: c.replicas, Sessions: c.sessions, Schema: padded, Allocator: c.mem})
	if err != nil {
		return nil, err
	}
	g := &group{devices: devices}
	g.step = step{p: p, padder: padder, devices: devices, keep: keep, stats: &g.stats, clock: newClock()}
	return g, nil
}

// startGroups starts WithGroups groups. If one fails to start, those
// started are shut down.
func (p *Predictor) startGroups(ctx context.Context, padded *arrow.Schema, padder *pad.Padder) ([]*group, error) {
	var groups []*group
	for range p.cfg.sessions {
		g, err := p.startGroup(ctx, padded, padder)
		if err != nil {
			for _, started := range groups {
				err = errors.Join(err, started.Shutdown(ctx))
			}
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// Run predicts one padded batch and takes ownership of it. The
// predictions hold the passthrough columns, then the model's, one row per
// real row of the batch. An error about one row is a device.RowError
// whose Row counts within the batch.
func (g *group) Run(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	return g.step.run(ctx, b)
}

// Shutdown shuts every session of the group down, once, with a context
// that is not cancelled, and joins their errors.
func (g *group) Shutdown(ctx context.Context) error { return g.devices.shutdown(ctx) }

// Stats returns the group's counters: batches, real and padding rows, and
// the device's time.
func (g *group) Stats() Stats { return g.stats }

// settings returns the Predictor's settings, for package online.
func (p *Predictor) settings() runner.Settings {
	c := &p.cfg
	s := runner.Settings{BatchSizes: slices.Clone(c.allowedSizes()), Groups: c.sessions, Replicas: c.replicas, Allocator: c.mem,
		Logger: c.logger}
	if fn := c.onStats; fn != nil {
		s.OnStats = func(st any) { fn(st.(Stats)) }
	}
	if c.prefetch > 0 {
		s.DatasetOnly = append(s.DatasetOnly, "WithPrefetch")
	}
	if c.keepPadding {
		s.DatasetOnly = append(s.DatasetOnly, "WithPadding")
	}
	if c.setAside != nil {
		s.DatasetOnly = append(s.DatasetOnly, "WithSetAside")
	}
	return s
}
