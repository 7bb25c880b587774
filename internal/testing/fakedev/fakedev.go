// Package fakedev is a fake device for tests: it doubles an int64 "id"
// column, counts its sessions and fails, panics or blocks on request.
package fakedev

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/pad"
	"github.com/drainpipe/drainpipe/predict"
)

// ErrInjected is the error a Model returns when told to fail.
var ErrInjected = errors.New("fakedev: injected failure")

// OutputSchema is the schema of the fake predictions: "y" = 2·id, with
// padding rows set to -1 so a leaked padding row is visible.
var OutputSchema = arrow.NewSchema([]arrow.Field{{Name: "y", Type: arrow.PrimitiveTypes.Int64}}, nil)

// Model is a fake device.Model. Set its fields before use.
type Model struct {
	// Fail, Panic and Short make Predict of batch FailAt (PanicAt, ShortAt)
	// on replica Replica fail, panic, or return one row too few.
	Fail, Panic, Short       bool
	FailAt, PanicAt, ShortAt int
	Replica                  int
	StartErr, ShutdownErr    error
	StartErrReplica          int // the replica whose Start returns StartErr
	// Block makes Predict wait until the channel is closed or ctx is done,
	// after any injected failure.
	Block chan struct{}
	// Poison, if set, fails every batch holding a real row whose id it
	// reports true for, as a model fails on a value it cannot take.
	Poison func(id int64) bool
	// TakesShort makes the model a device.ShortBatcher: it takes a
	// batch of any size up to the batch size.
	TakesShort bool
	// NamePoison makes the poison failure a device.RowError naming the
	// row, as a device that checks its rows says.
	NamePoison bool
	// Takes, if set, is the time Predict takes on a batch of rows rows:
	// slept, or with Spin spent on the CPU, as a device on the host's
	// cores spends it.
	Takes func(rows int) time.Duration
	Spin  bool

	Starts, Shutdowns, Predicts atomic.Int32
	// Live counts sessions started and not yet shut down.
	Live atomic.Int32

	mu      sync.Mutex
	configs []device.SessionConfig
	batches []Seen
}

// Seen records what a Predict call was given.
type Seen struct {
	Index, Rows, Padding, Replica int
}

var (
	_ device.Model        = (*Model)(nil)
	_ device.ShortBatcher = (*Model)(nil)
)

// ShortBatches implements device.ShortBatcher: TakesShort.
func (m *Model) ShortBatches() bool { return m.TakesShort }

// Start implements device.Model.
func (m *Model) Start(_ context.Context, cfg device.SessionConfig) (device.Session, error) {
	if m.StartErr != nil && cfg.Replica == m.StartErrReplica {
		return nil, m.StartErr
	}
	m.Starts.Add(1)
	m.Live.Add(1)
	m.mu.Lock()
	m.configs = append(m.configs, cfg)
	m.mu.Unlock()
	mem := cfg.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &session{m: m, cfg: cfg, mem: mem}, nil
}

// Configs returns the configurations sessions were started with.
func (m *Model) Configs() []device.SessionConfig {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]device.SessionConfig(nil), m.configs...)
}

// Batches returns what every Predict call saw, in call order.
func (m *Model) Batches() []Seen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Seen(nil), m.batches...)
}

type session struct {
	m    *Model
	cfg  device.SessionConfig
	mem  memory.Allocator
	down atomic.Bool
}

func (s *session) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	m := s.m
	if s.down.Load() {
		return nil, errors.New("fakedev: predict after shutdown")
	}
	m.Predicts.Add(1)
	m.mu.Lock()
	m.batches = append(m.batches, Seen{Index: b.Index, Rows: b.Rows(), Padding: b.Padding, Replica: s.cfg.Replica})
	m.mu.Unlock()
	here := s.cfg.Replica == m.Replica
	switch {
	case m.Fail && here && b.Index == m.FailAt:
		return nil, fmt.Errorf("batch %d: %w", b.Index, ErrInjected)
	case m.Panic && here && b.Index == m.PanicAt:
		panic(fmt.Sprintf("fakedev: panic at batch %d", b.Index))
	}
	if m.Block != nil {
		select {
		case <-m.Block:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	rows := int(b.Record.NumRows())
	if m.Takes != nil {
		d := m.Takes(rows)
		if m.Spin {
			for began := time.Now(); time.Since(began) < d; { //nolint:revive // the device is busy
			}
		} else {
			time.Sleep(d)
		}
	}
	if m.Poison != nil {
		ids := b.Record.Column(b.Record.Schema().FieldIndices("id")[0]).(*array.Int64)
		for i := range b.Rows() {
			if m.Poison(ids.Value(i)) {
				err := fmt.Errorf("poison id %d: %w", ids.Value(i), ErrInjected)
				if m.NamePoison {
					err = &device.RowError{Row: int64(i), Column: "id", Err: err}
				}
				return nil, err
			}
		}
	}
	if !slices.Contains(s.cfg.BatchSizes, rows) && (!m.TakesShort || rows > s.cfg.BatchSize) {
		return nil, fmt.Errorf("fakedev: batch of %d rows, session batch sizes %v", rows, s.cfg.BatchSizes)
	}
	ids := b.Record.Column(b.Record.Schema().FieldIndices("id")[0]).(*array.Int64)
	flags := b.Record.Column(b.Record.Schema().FieldIndices(pad.Column)[0]).(*array.Boolean)
	if m.Short && here && b.Index == m.ShortAt {
		rows--
	}
	ys := array.NewInt64Builder(s.mem)
	defer ys.Release()
	for i := range rows {
		if flags.Value(i) {
			ys.Append(-1)
		} else {
			ys.Append(2 * ids.Value(i))
		}
	}
	col := ys.NewArray()
	defer col.Release()
	return array.NewRecordBatch(OutputSchema, []arrow.Array{col}, int64(rows)), nil
}

func (s *session) Shutdown(context.Context) error {
	if s.down.Swap(true) {
		panic("fakedev: shutdown twice")
	}
	s.m.Shutdowns.Add(1)
	s.m.Live.Add(-1)
	return s.m.ShutdownErr
}

// AssertLifecycle fails the test unless m started and shut down exactly
// starts sessions.
func (m *Model) AssertLifecycle(t testing.TB, starts int32) {
	t.Helper()
	if s, d := m.Starts.Load(), m.Shutdowns.Load(); s != starts || d != starts {
		t.Fatalf("starts %d, shutdowns %d; want %d of each", s, d, starts)
	}
}

// Doubled returns the "y" a Model predicts for ids 0..n-1: 2·id.
func Doubled(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = 2 * int64(i)
	}
	return out
}

// NewPredictor returns a Predictor of m with opts, failing the test if the
// options are refused.
func NewPredictor(t testing.TB, m device.Model, opts ...predict.Option) *predict.Predictor {
	t.Helper()
	p, err := predict.New(m, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// RowCounter wraps a model to count the real (not padding) rows its
// sessions are given: the work a job did, retries and lost work included.
type RowCounter struct {
	device.Model
	Rows *atomic.Int64
}

// Start starts the wrapped model's session, counted.
func (m RowCounter) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	s, err := m.Model.Start(ctx, cfg)
	return countedSession{s, m.Rows}, err
}

type countedSession struct {
	device.Session
	rows *atomic.Int64
}

func (s countedSession) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	s.rows.Add(int64(b.Rows()))
	return s.Session.Predict(ctx, b)
}
