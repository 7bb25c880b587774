// Package runner is how package online runs a predict.Predictor's
// session groups on its own terms, without package predict exporting them
// to every user: predict sets the functions here when it is initialised,
// and online calls them. Users of the module see predict's Predict and
// All, and online's Batcher and Stream.
package runner

import (
	"context"
	"log/slog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
)

// Group is one started group of a Predictor's sessions (one a replica),
// which runs whole padded batches with the Predictor's hooks, row checks,
// passthrough columns and panic protection. Its methods are not safe for
// concurrent use.
type Group interface {
	// Run predicts one padded batch and takes ownership of it: one row a
	// real row, the passthrough columns first. An error about one row is
	// a device.RowError whose Row counts within the batch.
	Run(ctx context.Context, b device.Batch) (arrow.RecordBatch, error)
	// Shutdown shuts every session of the group down, once.
	Shutdown(ctx context.Context) error
}

// Settings is how a Predictor was configured; its slices are copies.
type Settings struct {
	// BatchSizes are the allowed global batch sizes, ascending; the last
	// is the batch size.
	BatchSizes []int
	Groups     int // session groups side by side
	Replicas   int // sessions a group
	Allocator  memory.Allocator
	Logger     *slog.Logger
	// OnStats calls the WithStats function, if one was given, with a
	// predict.Stats.
	OnStats func(stats any)
	// DatasetOnly names the options given that only Predict and All
	// apply (WithPrefetch, WithPadding, WithSetAside).
	DatasetOnly []string
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

// Set by package predict; p is a *predict.Predictor.
var (
	// StartGroup starts the sessions of one group for padded batches of
	// schema (the input's, with the padding column pad.New adds). ctx
	// bounds the start only. The caller must call Shutdown.
	StartGroup func(p any, ctx context.Context, padded *arrow.Schema) (Group, error)
	// Of returns a Predictor's settings.
	Of func(p any) Settings
)
