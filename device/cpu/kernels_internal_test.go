package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"gonum.org/v1/gonum/blas"

	"github.com/drainpipe/drainpipe/device"
)

// exp32 is e**x as softmax computes it.
func exp32(x float32) float32 {
	v := []float32{x}
	expShifted(v, 0)
	return v[0]
}

func TestExp32(t *testing.T) {
	worst := 0.0
	for i := range 200_000 {
		x := -87 + 87*float64(i)/200_000
		got, want := float64(exp32(float32(x))), math.Exp(float64(float32(x)))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 { // float32's epsilon is 1.19e-7
		t.Fatalf("exp32 relative error up to %.3g", worst)
	}
	if exp32(-100) != 0 || exp32(0) != 1 {
		t.Fatalf("exp32(-100) = %v, exp32(0) = %v", exp32(-100), exp32(0))
	}
}

// benchMLP returns a session of the MLP 64-256-256-10 at batch 256 and a
// batch of random features.
func benchMLP(b *testing.B, serial bool) (*MLP, *session, []float32) {
	m, err := NewMLP([]int{64, 256, 256, 10}, ReLU, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		b.Fatal(err)
	}
	m.Serial = serial
	schema := arrow.NewSchema([]arrow.Field{{Name: "features", Type: arrow.FixedSizeListOf(64, arrow.PrimitiveTypes.Float32)}}, nil)
	s, err := m.Start(b.Context(), device.SessionConfig{BatchSize: 256, BatchSizes: []int{256}, Replicas: 1, Sessions: 1, Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	x := make([]float32, 256*64)
	for i := range x {
		x[i] = rand.Float32()*2 - 1
	}
	return m, s.(*session), x
}

// BenchmarkForward is the CPU device's forward step on one batch of 256;
// BenchmarkBareGEMM is the same three matrix products alone, the bound the
// element-wise passes and the output record are measured against.
//
//	OPENBLAS_NUM_THREADS=1 go test -tags openblas -run '^$' -bench 'Forward|BareGEMM' ./device/cpu
func BenchmarkForward(b *testing.B) {
	for _, serial := range []bool{false, true} {
		b.Run(fmt.Sprintf("serial=%t", serial), func(b *testing.B) {
			_, s, x := benchMLP(b, serial)
			for b.Loop() {
				s.forward(x, 256, 256).Release()
			}
			b.ReportMetric(256*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func BenchmarkBareGEMM(b *testing.B) {
	for _, serial := range []bool{false, true} {
		b.Run(fmt.Sprintf("serial=%t", serial), func(b *testing.B) {
			m, s, x := benchMLP(b, serial)
			out := make([]float32, 256*10)
			for b.Loop() {
				benchLayers(m, s, serial, x, out, nil)
			}
			b.ReportMetric(256*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkNaiveForward is the forward step as one writes it directly over
// the same BLAS: the matrix products, then a scalar bias and max(0, x)
// loop, a float64 softmax and an argmax into plain slices. It is the "bare
// loop" BenchmarkForward (which also builds the Arrow output) is compared
// with.
func BenchmarkNaiveForward(b *testing.B) {
	for _, serial := range []bool{false, true} {
		b.Run(fmt.Sprintf("serial=%t", serial), func(b *testing.B) {
			m, s, x := benchMLP(b, serial)
			out := make([]float32, 256*10)
			classes := make([]int64, 256)
			for b.Loop() {
				benchLayers(m, s, serial, x, out, func(l Layer, y []float32) {
					for r := range 256 {
						row := y[r*l.Out : (r+1)*l.Out]
						for j := range row {
							row[j] += l.Bias[j]
							if l.Activation == ReLU && row[j] < 0 {
								row[j] = 0
							}
						}
					}
				})
				for r := range 256 {
					row := out[r*10 : (r+1)*10]
					best, peak := 0, row[0]
					for j, v := range row {
						if v > peak {
							best, peak = j, v
						}
					}
					var sum float64
					for j, v := range row {
						e := math.Exp(float64(v - peak))
						row[j] = float32(e)
						sum += e
					}
					for j := range row {
						row[j] = float32(float64(row[j]) / sum)
					}
					classes[r] = int64(best)
				}
			}
			b.ReportMetric(256*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// benchLayers runs the matrix products of m's layers over a batch of 256
// rows x into s's hidden buffers and out, calling after (if not nil) on
// each layer's output.
func benchLayers(m *MLP, s *session, serial bool, x, out []float32, after func(l Layer, y []float32)) {
	in := x
	for i, l := range m.Layers {
		y := out
		if i < len(s.hidden) {
			y = s.hidden[i]
		}
		if serial {
			serialGemm(s.impl, 256, l.Out, l.In, in, l.Weights, y)
		} else {
			s.impl.Sgemm(blas.NoTrans, blas.NoTrans, 256, l.Out, l.In, 1, in, l.In, l.Weights, l.Out, 0, y, l.Out)
		}
		if after != nil {
			after(l, y)
		}
		in = y
	}
}

// BenchmarkSoftmax is the output layer's softmax over a batch of 256 rows
// of 10 classes.
func BenchmarkSoftmax(b *testing.B) {
	src, x := make([]float32, 256*10), make([]float32, 256*10)
	for i := range src {
		src[i] = float32(i%37)/4 - 4
	}
	for b.Loop() {
		copy(x, src)
		for r := 0; r < len(x); r += 10 {
			softmax(x[r : r+10])
		}
	}
}
