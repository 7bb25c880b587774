//go:build onnx

package onnx

import (
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/pad"
)

// BenchmarkSessionVsDirect runs the MLP 64-256-256-10 on the same 64
// batches of 256 rows through the device session (Predict: the batch's
// Arrow column in, an Arrow record out) and through ONNX Runtime called
// directly (a session with its tensors bound, each batch's features copied
// into the input tensor, the outputs left in theirs), one intra-op thread
// each, in interleaved rounds. It reports each rate and the session's over
// ORT's (median of the rounds, lowest and highest).
//
//	go test -tags onnx -run '^$' -bench SessionVsDirect -benchtime 1x ./device/onnx
func BenchmarkSessionVsDirect(b *testing.B) {
	needLibrary(b)
	const rows, batches, rounds = 256, 64, 9
	mem := memory.NewGoAllocator()
	ds := dataset.UniformTensors(mem, rows*batches, 64, rows, 3)
	schema := arrow.NewSchema([]arrow.Field{ds.Schema().Field(1), pad.Field()}, nil)
	var recs []arrow.RecordBatch
	var xs [][]float32
	for rec, err := range ds.Records() {
		if err != nil {
			b.Fatal(err)
		}
		flags := array.NewBooleanBuilder(mem)
		flags.AppendValues(make([]bool, rows), nil)
		col := flags.NewArray()
		flags.Release()
		recs = append(recs, array.NewRecordBatch(schema, []arrow.Array{rec.Column(1), col}, rows))
		col.Release()
		l := rec.Column(1).(*array.FixedSizeList)
		xs = append(xs, l.ListValues().(*array.Float32).Float32Values()[l.Offset()*64:(l.Offset()+rows)*64])
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()

	m := open(b, "mlp.onnx", WithIntraOpThreads(1))
	sess, err := m.Start(b.Context(), device.SessionConfig{BatchSize: rows, BatchSizes: []int{rows}, Replicas: 1, Sessions: 1, Schema: schema, Allocator: mem})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Shutdown(b.Context())

	if err := acquireEnv(DefaultLibrary()); err != nil {
		b.Fatal(err)
	}
	defer releaseEnv()
	in, _ := ort.NewEmptyTensor[float32](ort.NewShape(rows, 64))
	defer in.Destroy()
	probs, _ := ort.NewEmptyTensor[float32](ort.NewShape(rows, 10))
	defer probs.Destroy()
	class, _ := ort.NewEmptyTensor[int64](ort.NewShape(rows))
	defer class.Destroy()
	opts, _ := ort.NewSessionOptions()
	defer opts.Destroy()
	opts.SetIntraOpNumThreads(1)
	direct, err := ort.NewAdvancedSession("testdata/mlp.onnx", []string{"features"}, []string{"probabilities", "class"},
		[]ort.Value{in}, []ort.Value{probs, class}, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Destroy()

	runDirect := func() {
		for _, x := range xs {
			copy(in.GetData(), x)
			if err := direct.Run(); err != nil {
				b.Fatal(err)
			}
		}
	}
	runSession := func() {
		for i, rec := range recs {
			out, err := sess.Predict(b.Context(), device.Batch{Index: i, Record: rec})
			if err != nil {
				b.Fatal(err)
			}
			out.Release()
		}
	}
	timed := func(f func()) float64 {
		began := time.Now()
		f()
		return float64(rows*batches) / time.Since(began).Seconds()
	}
	runDirect()
	runSession()
	var directRates, sessionRates, ratios []float64
	for range b.N {
		for r := range rounds {
			var d, s float64
			if r%2 == 0 {
				d, s = timed(runDirect), timed(runSession)
			} else {
				s, d = timed(runSession), timed(runDirect)
			}
			directRates, sessionRates, ratios = append(directRates, d), append(sessionRates, s), append(ratios, s/d)
		}
	}
	slices.Sort(ratios)
	b.ReportMetric(median(directRates), "direct_rows/s")
	b.ReportMetric(median(sessionRates), "session_rows/s")
	b.ReportMetric(ratios[len(ratios)/2], "session/direct")
	b.ReportMetric(ratios[0], "session/direct_min")
	b.ReportMetric(ratios[len(ratios)-1], "session/direct_max")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
