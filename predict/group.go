package predict

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/pad"
)

// Group is one group of device sessions, one per replica (WithReplicas),
// that runs whole padded batches (Triton calls such a group an instance):
// the hooks around each, the model's outputs checked for one row per
// batch row, the passthrough columns put back, the padding rows dropped,
// and a panic of the model or a hook turned into an error. Predict and
// All run WithGroups groups over a dataset; package online runs its own
// over the same Predictor for requests that arrive one by one.
//
// A Group's methods are not safe for concurrent use.
type Group struct {
	devices *replicas
	step    step
	stats   Stats
}

// StartGroup starts the sessions of one group for padded batches of
// schema: the input's, with the padding column pad.New adds. ctx bounds
// the start only. The caller must call Shutdown.
func (p *Predictor) StartGroup(ctx context.Context, padded *arrow.Schema) (*Group, error) {
	return p.startGroup(ctx, padded, nil)
}

// startGroup starts a group; with padder, the group bisects a failing
// batch to set its poison rows aside (WithSetAside).
func (p *Predictor) startGroup(ctx context.Context, padded *arrow.Schema, padder *pad.Padder) (*Group, error) {
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
	g := &Group{devices: devices}
	g.step = step{p: p, padder: padder, devices: devices, keep: keep, stats: &g.stats, clock: newClock()}
	return g, nil
}

// startGroups starts WithGroups groups. If one fails to start, those
// started are shut down.
func (p *Predictor) startGroups(ctx context.Context, padded *arrow.Schema, padder *pad.Padder) ([]*Group, error) {
	var groups []*Group
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
func (g *Group) Run(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	return g.step.run(ctx, b)
}

// Shutdown shuts every session of the group down, once, with a context
// that is not cancelled, and joins their errors.
func (g *Group) Shutdown(ctx context.Context) error { return g.devices.shutdown(ctx) }

// Stats returns the group's counters: batches, real and padding rows, and
// the device's time.
func (g *Group) Stats() Stats { return g.stats }

// Settings is how a Predictor was configured, for a package that runs
// its groups on its own terms (package online).
type Settings struct {
	// BatchSizes are the allowed global batch sizes, ascending; the last
	// is the batch size.
	BatchSizes []int
	Groups     int // session groups side by side
	Replicas   int // sessions a group
	Allocator  memory.Allocator
	Logger     *slog.Logger
	OnStats    func(Stats) // the WithStats function, or nil
	// DatasetOnly names the options given that only Predict and All
	// apply (WithPrefetch, WithPadding, WithSetAside).
	DatasetOnly []string
}

// Settings returns the Predictor's settings.
func (p *Predictor) Settings() Settings {
	c := &p.cfg
	s := Settings{BatchSizes: slices.Clone(c.allowedSizes()), Groups: c.sessions, Replicas: c.replicas, Allocator: c.mem,
		Logger: c.logger, OnStats: c.onStats}
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

// BatchSize returns the largest allowed batch size.
func (s Settings) BatchSize() int { return s.BatchSizes[len(s.BatchSizes)-1] }

// PaddedSize returns the allowed batch size a batch of rows real rows is
// padded to: the smallest that holds it.
func (s Settings) PaddedSize(rows int) int {
	for _, size := range s.BatchSizes {
		if size >= rows {
			return size
		}
	}
	return s.BatchSize()
}
