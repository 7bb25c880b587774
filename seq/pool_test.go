package seq_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/internal/testing/seqtest"
	"github.com/drainpipe/drainpipe/seq"
)

// poolAlone is sentence-transformers' Pooling of one row run alone,
// written out: hidden is n × w.
func poolAlone(p seq.Pooling, hidden []float32, n, w int) []float32 {
	out := make([]float32, w)
	for j := range w {
		var v float64
		switch p {
		case seq.CLS:
			v = float64(hidden[j])
		case seq.Last:
			v = float64(hidden[(n-1)*w+j])
		case seq.Max:
			v = math.Inf(-1)
			for t := range n {
				v = math.Max(v, float64(hidden[t*w+j]))
			}
		default:
			var sum, weights float64
			for t := range n {
				wt := 1.0
				if p == seq.WeightedMean {
					wt = float64(t + 1)
				}
				sum += wt * float64(hidden[t*w+j])
				weights += wt
			}
			if p == seq.MeanSqrtLen {
				weights = math.Sqrt(weights)
			}
			v = sum / weights
		}
		out[j] = float32(v)
	}
	return out
}

// scale is a module that doubles and drops the last value, to see the
// modules' widths and order.
type scale struct{}

func (scale) OutWidth(in int) (int, error) { return in - 1, nil }
func (scale) Apply(dst, src []float32) {
	for i := range dst {
		dst[i] = 2 * src[i]
	}
}

// TestPoolingsAndModules: every pooling, several concatenated in the
// order given, then modules in theirs, under right and left padding and
// RoBERTa's position ids, each row within 1e-6 of the row run alone.
func TestPoolingsAndModules(t *testing.T) {
	data := rows(t, 300)
	all := []seq.Pooling{seq.CLS, seq.Max, seq.Mean, seq.MeanSqrtLen, seq.WeightedMean, seq.Last}
	cases := []struct {
		poolings []seq.Pooling
		modules  []seq.Module
		left     bool
		start    int64
	}{
		{all, nil, false, 0},
		{all, nil, true, 0},
		{[]seq.Pooling{seq.Max, seq.CLS}, []seq.Module{scale{}, seq.Normalize{}}, false, 2},
		{[]seq.Pooling{seq.WeightedMean}, []seq.Module{seq.Normalize{}}, true, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/left=%v/start=%d/modules=%d", c.poolings, c.left, c.start, len(c.modules)), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			opts := []seq.Option{seq.WithPlanner(seq.Planner{Buckets: seq.DefaultBuckets(512)}), seq.WithPoolings(c.poolings...), seq.WithModules(c.modules...), seq.WithPositionStart(c.start)}
			if c.left {
				opts = append(opts, seq.WithLeftPadding())
			}
			m, err := seq.New(&seqtest.Engine{Width: width}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			res, err := run(t, mem, m, data, 128)
			if err != nil {
				t.Fatal(err)
			}
			for i, ids := range data {
				ids = ids[:min(len(ids), 512)]
				n := max(len(ids), 1)
				if len(ids) == 0 {
					ids = []int64{0}
				}
				mask, pos := make([]int64, n), make([]int64, n)
				for k := range n {
					mask[k], pos[k] = 1, c.start+int64(k)
				}
				hidden := make([]float32, n*width)
				if err := seqtest.Row(width, 0, ids, mask, pos, hidden, make([]float32, width), make([]float32, 3)); err != nil {
					t.Fatal(err)
				}
				var want []float32
				for _, p := range c.poolings {
					want = append(want, poolAlone(p, hidden, n, width)...)
				}
				for _, mod := range c.modules {
					w, _ := mod.OutWidth(len(want))
					next := make([]float32, w)
					mod.Apply(next, want)
					want = next
				}
				if !near(res.pooled[i], want, 1e-6) {
					t.Fatalf("row %d (%d tokens): got %v, want %v", i, n, res.pooled[i][:4], want[:4])
				}
			}
		})
	}
}
