package cpu

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// The analytic gradient of the fitting objective matches finite differences.
func TestCrossEntropyGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n, d, k = 20, 3, 4
	x := mat.NewDense(n, d, nil)
	labels := make([]int, n)
	for i := range n {
		labels[i] = rng.IntN(k)
		for j := range d {
			x.Set(i, j, rng.NormFloat64())
		}
	}
	c := &crossEntropy{x: x, labels: labels, k: k, d: d, l2: 0.1, z: mat.NewDense(n, k, nil), g: mat.NewDense(n, k, nil)}
	params := make([]float64, (d+1)*k)
	for i := range params {
		params[i] = rng.NormFloat64()
	}
	got := make([]float64, len(params))
	c.grad(got, params)
	want := fd.Gradient(nil, c.value, params, &fd.Settings{Formula: fd.Central})
	if !floats.EqualApprox(got, want, 1e-6) {
		t.Fatalf("gradient\n got %v\nwant %v", got, want)
	}
}
