// Command padding is the library's story on one screen: 100 images (random
// 32×32×3 pixels) through an MLP on the CPU in batches of 16, a static
// shape: 7 device steps, the last one 4 real rows and 12 padding rows,
// which never reach the predictions. It shows the device session start and
// shut down, one line of classes a step, and a one-line summary.
package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/predict"
)

const (
	images    = 100
	pixels    = 32 * 32 * 3
	classes   = 10
	batchSize = 16
)

func main() {
	if err := run(context.Background(), os.Stdout, memory.DefaultAllocator); err != nil {
		fmt.Fprintln(os.Stderr, "padding:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, mem memory.Allocator) error {
	// The device runs ahead of this consumer in its own goroutine, so both
	// print through one lock.
	w := &lockedWriter{w: out}
	model, err := cpu.NewMLP([]int{pixels, 64, classes}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		return err
	}
	dev := &announced{Model: model, w: w}
	images := dataset.UniformTensors(mem, images, pixels, 32, 42)

	var stats predict.Stats
	p, err := predict.New(dev,
		predict.WithBatchSize(batchSize),
		predict.WithAllocator(mem),
		predict.WithPassthrough("id"),
		predict.WithHooks(predict.Hook{Before: func(_ context.Context, b device.Batch) error {
			fmt.Fprintf(w, "step %d: %d images + %d padding\n", b.Index+1, b.Rows(), b.Padding)
			return nil
		}}),
		predict.WithStats(func(s predict.Stats) { stats = s }),
	)
	if err != nil {
		return err
	}
	for r := range p.Predict(ctx, images) {
		if r.Err != nil {
			return r.Err
		}
		ids := r.Record.Column(0).(*array.Int64)
		class := r.Record.Column(1).(*array.Int64)
		fmt.Fprintf(w, "  images %2d..%2d -> classes %v\n", ids.Value(0), ids.Value(ids.Len()-1), class.Int64Values())
		r.Record.Release()
	}
	// The channel is closed, so the session has shut down.
	shutdown := "ok"
	if !dev.down.Load() {
		shutdown = "missing"
	}
	fmt.Fprintf(w, "rows=%d batches=%d padded=%d shutdown=%s\n", stats.Rows, stats.Batches, stats.PaddedRows, shutdown)
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// announced wraps a model to print its session's start and shutdown.
type announced struct {
	device.Model
	w    io.Writer
	down atomic.Bool
}

func (a *announced) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	s, err := a.Model.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(a.w, "device: session started, batch size %d\n", cfg.BatchSize)
	return &announcedSession{Session: s, a: a}, nil
}

type announcedSession struct {
	device.Session
	a *announced
}

func (s *announcedSession) Shutdown(ctx context.Context) error {
	err := s.Session.Shutdown(ctx)
	if err == nil {
		s.a.down.Store(true)
	}
	fmt.Fprintf(s.a.w, "device: session shut down (err=%v)\n", err)
	return err
}
