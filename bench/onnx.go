//go:build onnx

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/onnx"
)

const onnxMLP = "device/onnx/testdata/mlp.onnx"

// onnxModel returns the ONNX Runtime MLP 64-256-256-10 of the onnx device's
// tests, for the mlp workload's onnx runners, or a note why there is none.
func onnxModel(threads int) (device.Model, string) {
	if onnx.DefaultLibrary() == "" {
		return nil, "skipped: no ONNX Runtime library (scripts/fetch-onnxruntime.sh)"
	}
	m, err := onnx.Open(onnxMLP, onnx.WithIntraOpThreads(threads))
	if err != nil {
		return nil, "skipped: " + err.Error()
	}
	return m, ""
}

// onnxGoals are the ONNX device's goals: whole batches on one-thread
// sessions against one session on every core, and the session against
// ONNX Runtime called directly on the same batches.
func onnxGoals(c *config, recs []arrow.RecordBatch) []goal {
	cores := runtime.GOMAXPROCS(0)
	single, note := onnxModel(1)
	if single == nil {
		fmt.Println("ONNX goals", note)
		return nil
	}
	wide, _ := onnxModel(cores)
	mem := dataset.FromRecords(dataset.TensorSchema(width), recs...)
	return []goal{
		// Not a goal: which of the two the CLI runs by default
		// (cmd/drainpipe/model_onnx.go), the faster as this line shows.
		{fmt.Sprintf("ONNX whole batches: %d sessions × 1 thread ÷ 1 session × %d threads", cores, cores), lineOnly, func(r int) float64 {
			many, one := pair(r, func() float64 { return c.drainpipeWith(single, mem, 0, cores) }, func() float64 { return c.drainpipeWith(wide, mem, 0, 1) })
			return one / many
		}},
		{"ONNX: the device session ÷ ONNX Runtime called directly (1 thread)", atLeast(0.98), func(r int) float64 {
			session, direct := pair(r, func() float64 { return c.onnxSession(single, recs) }, func() float64 { return c.onnxDirect(single, recs) })
			return direct / session
		}},
		{fmt.Sprintf("ONNX job: Parquet → folder ÷ the model alone (%d sessions × 1 thread)", cores), atLeast(0.88), func(r int) float64 {
			alone, job := pair(r, func() float64 { return c.drainpipeWith(single, mem, 0, cores) }, func() float64 { return c.job(single, filepath.Join(c.dir, "input.parquet"), "folder", cores) })
			return alone / job
		}},
		{fmt.Sprintf("ONNX job: Parquet → file ÷ the model alone (%d sessions × 1 thread)", cores), atLeast(0.88), func(r int) float64 {
			alone, job := pair(r, func() float64 { return c.drainpipeWith(single, mem, 0, cores) }, func() float64 { return c.job(single, filepath.Join(c.dir, "input.parquet"), "file", cores) })
			return alone / job
		}},
	}
}

// onnxSession times the device session's Predict over padded batches,
// after its start.
func (c *config) onnxSession(m device.Model, recs []arrow.RecordBatch) float64 {
	batches, sess, done := c.onnxStart(m, recs)
	defer done()
	ctx := context.Background()
	start := time.Now()
	for _, b := range batches {
		out, err := sess.Predict(ctx, b)
		check(err)
		out.Release()
	}
	return time.Since(start).Seconds()
}

// onnxStart pads the records into batches and starts a one-thread
// session; done shuts it down and releases the batches.
func (c *config) onnxStart(m device.Model, recs []arrow.RecordBatch) ([]device.Batch, device.Session, func()) {
	batches, schema, release := c.padded(recs)
	ctx := context.Background()
	sess, err := m.Start(ctx, device.SessionConfig{BatchSize: c.batch, BatchSizes: []int{c.batch}, Replicas: 1, Sessions: 1, Schema: schema, Allocator: c.mem})
	check(err)
	return batches, sess, func() {
		check(sess.Shutdown(ctx))
		release()
	}
}

// onnxDirect times ONNX Runtime called directly over the same batches:
// one session with its tensors bound, each batch's features copied into
// the input tensor, the outputs left in theirs. A device session holds
// the runtime's environment meanwhile.
func (c *config) onnxDirect(m device.Model, recs []arrow.RecordBatch) float64 {
	batches, _, done := c.onnxStart(m, recs)
	defer done()
	rows := int64(c.batch)
	in, err := ort.NewEmptyTensor[float32](ort.NewShape(rows, width))
	check(err)
	defer in.Destroy()
	probs, err := ort.NewEmptyTensor[float32](ort.NewShape(rows, 10))
	check(err)
	defer probs.Destroy()
	class, err := ort.NewEmptyTensor[int64](ort.NewShape(rows))
	check(err)
	defer class.Destroy()
	opts, err := ort.NewSessionOptions()
	check(err)
	defer opts.Destroy()
	check(opts.SetIntraOpNumThreads(1))
	direct, err := ort.NewAdvancedSession(onnxMLP, []string{"features"}, []string{"probabilities", "class"}, []ort.Value{in}, []ort.Value{probs, class}, opts)
	check(err)
	defer direct.Destroy()
	start := time.Now()
	for _, b := range batches {
		l := b.Record.Column(1).(*array.FixedSizeList)
		copy(in.GetData(), l.ListValues().(*array.Float32).Float32Values()[l.Offset()*width:(l.Offset()+l.Len())*width])
		check(direct.Run())
	}
	return time.Since(start).Seconds()
}

// onnxBuilt says this build has the onnx tag.
const onnxBuilt = true
