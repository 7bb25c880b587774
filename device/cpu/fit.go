package cpu

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize"
)

// ErrFit reports training data that cannot be fitted.
var ErrFit = errors.New("cpu: cannot fit")

// FitSoftmaxRegression fits a softmax-regression model to the rows of x
// (n×d) and their labels in 0..classes-1 by minimising the mean
// cross-entropy plus l2/2 times the squared weights, with gonum's L-BFGS,
// in float64. The model it returns computes in float32.
func FitSoftmaxRegression(x mat.Matrix, labels []int, classes int, l2 float64) (*MLP, error) {
	n, d := x.Dims()
	switch {
	case n == 0 || n != len(labels):
		return nil, fmt.Errorf("%w: %d rows, %d labels", ErrFit, n, len(labels))
	case classes < 2:
		return nil, fmt.Errorf("%w: %d classes, want at least 2", ErrFit, classes)
	}
	for i, l := range labels {
		if l < 0 || l >= classes {
			return nil, fmt.Errorf("%w: row %d: label %d, want 0..%d", ErrFit, i, l, classes-1)
		}
	}
	obj := &crossEntropy{x: x, labels: labels, k: classes, d: d, l2: l2,
		z: mat.NewDense(n, classes, nil), g: mat.NewDense(n, classes, nil)}
	params := make([]float64, (d+1)*classes) // W (d×k, row-major), then b (k)
	problem := optimize.Problem{Func: obj.value, Grad: obj.grad}
	res, err := optimize.Minimize(problem, params, &optimize.Settings{GradientThreshold: 1e-8, MajorIterations: 1000}, &optimize.LBFGS{})
	if err != nil {
		status := "no result"
		if res != nil {
			status = fmt.Sprintf("status %v after %d iterations", res.Status, res.MajorIterations)
		}
		return nil, fmt.Errorf("%w: %v (%s)", ErrFit, err, status)
	}
	m := NewSoftmaxRegression(d, classes)
	for i, v := range res.X[:d*classes] {
		m.Layers[0].Weights[i] = float32(v)
	}
	for i, v := range res.X[d*classes:] {
		m.Layers[0].Bias[i] = float32(v)
	}
	return m, nil
}

// crossEntropy is the fitting objective. z holds the logits, then the
// probabilities; g the gradient of the loss by the logits.
type crossEntropy struct {
	x      mat.Matrix
	labels []int
	k, d   int
	l2     float64
	z, g   *mat.Dense
}

// probabilities computes softmax(x·W + b) into z and returns the mean loss.
func (c *crossEntropy) probabilities(params []float64) float64 {
	w := mat.NewDense(c.d, c.k, params[:c.d*c.k])
	b := params[c.d*c.k:]
	c.z.Mul(c.x, w)
	var loss float64
	for i, l := range c.labels {
		row := c.z.RawRowView(i)
		floats.Add(row, b)
		top := floats.Max(row)
		var sum float64
		for j, v := range row {
			row[j] = math.Exp(v - top)
			sum += row[j]
		}
		floats.Scale(1/sum, row)
		loss -= math.Log(math.Max(row[l], 1e-300))
	}
	n := float64(len(c.labels))
	return loss/n + c.l2/2*floats.Dot(params[:c.d*c.k], params[:c.d*c.k])
}

func (c *crossEntropy) value(params []float64) float64 { return c.probabilities(params) }

func (c *crossEntropy) grad(grad, params []float64) {
	c.probabilities(params)
	n := float64(len(c.labels))
	c.g.Copy(c.z)
	for i, l := range c.labels {
		c.g.Set(i, l, c.g.At(i, l)-1)
	}
	gw := mat.NewDense(c.d, c.k, grad[:c.d*c.k])
	gw.Mul(c.x.T(), c.g)
	gw.Scale(1/n, gw)
	floats.AddScaled(grad[:c.d*c.k], c.l2, params[:c.d*c.k])
	gb := grad[c.d*c.k:]
	clear(gb)
	for i := range c.labels {
		floats.Add(gb, c.g.RawRowView(i))
	}
	floats.Scale(1/n, gb)
}
