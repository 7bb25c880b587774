package cpu_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/drainpipe/drainpipe/device/cpu"
)

// blobs returns n points around k well-separated centers in d dimensions.
func blobs(rng *rand.Rand, n, d, k int) (*mat.Dense, []int) {
	x := mat.NewDense(n, d, nil)
	labels := make([]int, n)
	for i := range n {
		labels[i] = i % k
		for j := range d {
			center := 4.0 * float64((labels[i]+j)%k)
			x.Set(i, j, center+rng.NormFloat64())
		}
	}
	return x, labels
}

func TestFitSoftmaxRegression(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	x, labels := blobs(rng, 600, 4, 3)
	m, err := cpu.FitSoftmaxRegression(x, labels, 3, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if m.InputSize() != 4 || m.Classes() != 3 {
		t.Fatalf("model %d→%d", m.InputSize(), m.Classes())
	}
	correct := 0
	for i, l := range labels {
		best, bestScore := 0, float32(0)
		for c := range 3 {
			s := m.Layers[0].Bias[c]
			for j := range 4 {
				s += float32(x.At(i, j)) * m.Layers[0].Weights[j*3+c]
			}
			if c == 0 || s > bestScore {
				best, bestScore = c, s
			}
		}
		if best == l {
			correct++
		}
	}
	if acc := float64(correct) / 600; acc < 0.97 {
		t.Fatalf("training accuracy %.3f on separable blobs", acc)
	}
}

func TestFitErrors(t *testing.T) {
	x := mat.NewDense(2, 2, []float64{1, 2, 3, 4})
	for name, c := range map[string]struct {
		labels  []int
		classes int
	}{
		"label count":  {[]int{0}, 2},
		"one class":    {[]int{0, 0}, 1},
		"out of range": {[]int{0, 2}, 2},
	} {
		if _, err := cpu.FitSoftmaxRegression(x, c.labels, c.classes, 0); !errors.Is(err, cpu.ErrFit) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}
