package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"

	"github.com/drainpipe/drainpipe/device/cpu/internal/relu"
)

// Activation is the function applied after a layer's affine map.
type Activation uint32

const (
	Identity Activation = iota
	ReLU
	Tanh
	Sigmoid
	Softmax // output layer only
)

func (a Activation) String() string {
	switch a {
	case Identity:
		return "identity"
	case ReLU:
		return "relu"
	case Tanh:
		return "tanh"
	case Sigmoid:
		return "sigmoid"
	case Softmax:
		return "softmax"
	}
	return fmt.Sprintf("activation(%d)", uint32(a))
}

// ErrModel reports a model whose layers do not fit together.
var ErrModel = errors.New("cpu: invalid model")

// ErrNonFinite reports a NaN or infinite feature value: the products would
// spread it over the row's outputs, and the argmax of NaN probabilities is
// not a class.
var ErrNonFinite = errors.New("cpu: feature value is not finite")

// Layer is a dense layer: y = act(x·W + b).
type Layer struct {
	In, Out    int
	Weights    []float32 // In×Out, row-major
	Bias       []float32 // Out
	Activation Activation
}

// DefaultFeature is the feature column an MLP reads unless told otherwise.
const DefaultFeature = "features"

// MLP is a multilayer perceptron with a softmax output. Its fields may be
// set directly; [MLP.Validate] checks them, and Start does too.
type MLP struct {
	Layers []Layer
	// Feature names the input column; "" means DefaultFeature.
	Feature string
	// BLAS computes the matrix products; nil means the build's default:
	// gonum's pure-Go BLAS, or OpenBLAS when built with the openblas tag.
	BLAS blas.Float32
	// Serial keeps every matrix product on the session's goroutine instead
	// of letting the BLAS fan out over all cores. Sessions that run as one
	// of several replicas or session groups are always serial, so they do
	// not fight over the cores: gonum's products are cut into tiles it
	// computes on one goroutine; OpenBLAS is set to one thread, for the
	// process (its version in Debian has no per-thread setting).
	Serial bool
	// AllowNonFinite predicts rows with NaN or infinite features instead of
	// failing them with ErrNonFinite (their outputs are then NaN).
	AllowNonFinite bool
}

// NewMLP returns an MLP with the given layer sizes (input first, classes
// last), the hidden activation between them and a softmax output, with
// Glorot-uniform weights drawn from rng and zero biases.
func NewMLP(sizes []int, hidden Activation, rng *rand.Rand) (*MLP, error) {
	if len(sizes) < 2 {
		return nil, fmt.Errorf("%w: need at least input and output sizes, got %v", ErrModel, sizes)
	}
	m := &MLP{}
	for i := 0; i+1 < len(sizes); i++ {
		in, out := sizes[i], sizes[i+1]
		if in <= 0 || out <= 0 {
			return nil, fmt.Errorf("%w: layer %d: sizes %d×%d", ErrModel, i, in, out)
		}
		act := hidden
		if i+2 == len(sizes) {
			act = Softmax
		}
		limit := math.Sqrt(6 / float64(in+out))
		w := make([]float32, in*out)
		for j := range w {
			w[j] = float32((rng.Float64()*2 - 1) * limit)
		}
		m.Layers = append(m.Layers, Layer{In: in, Out: out, Weights: w, Bias: make([]float32, out), Activation: act})
	}
	return m, nil
}

// NewSoftmaxRegression returns a one-layer softmax model with zero weights.
func NewSoftmaxRegression(in, classes int) *MLP {
	return &MLP{Layers: []Layer{{
		In: in, Out: classes,
		Weights:    make([]float32, in*classes),
		Bias:       make([]float32, classes),
		Activation: Softmax,
	}}}
}

// InputSize returns the number of features per row.
func (m *MLP) InputSize() int { return m.Layers[0].In }

// Classes returns the number of output classes.
func (m *MLP) Classes() int { return m.Layers[len(m.Layers)-1].Out }

func (m *MLP) feature() string {
	if m.Feature == "" {
		return DefaultFeature
	}
	return m.Feature
}

// DefaultBLAS returns the BLAS the build uses by default (see BLASName).
func DefaultBLAS() blas.Float32 { return defaultBLAS() }

func (m *MLP) blas() blas.Float32 {
	if m.BLAS == nil {
		return defaultBLAS()
	}
	return m.BLAS
}

// Validate reports whether the layers chain and hold the right number of
// parameters.
func (m *MLP) Validate() error {
	if len(m.Layers) == 0 {
		return fmt.Errorf("%w: no layers", ErrModel)
	}
	for i, l := range m.Layers {
		switch {
		case l.In <= 0 || l.Out <= 0:
			return fmt.Errorf("%w: layer %d: sizes %d×%d", ErrModel, i, l.In, l.Out)
		case len(l.Weights) != l.In*l.Out:
			return fmt.Errorf("%w: layer %d: %d weights, want %d×%d", ErrModel, i, len(l.Weights), l.In, l.Out)
		case len(l.Bias) != l.Out:
			return fmt.Errorf("%w: layer %d: %d biases, want %d", ErrModel, i, len(l.Bias), l.Out)
		case i > 0 && l.In != m.Layers[i-1].Out:
			return fmt.Errorf("%w: layer %d takes %d inputs, layer %d gives %d", ErrModel, i, l.In, i-1, m.Layers[i-1].Out)
		case l.Activation > Softmax:
			return fmt.Errorf("%w: layer %d: unknown %s", ErrModel, i, l.Activation)
		case (l.Activation == Softmax) != (i == len(m.Layers)-1):
			return fmt.Errorf("%w: layer %d: softmax must be the output activation, and only it", ErrModel, i)
		}
	}
	return nil
}

// forward computes the rows×Out activations of layer l for input x into y.
// With tile set it cuts the product into tiles the BLAS computes on the
// calling goroutine.
func (l *Layer) forward(impl blas.Float32, tile bool, x []float32, rows int, y []float32) {
	// Start every output row at the bias and let the product add to it:
	// a copy is cheaper than a pass of additions after it.
	bias := l.Bias
	for r := range rows {
		copy(y[r*l.Out:(r+1)*l.Out], bias)
	}
	if tile {
		serialGemm(impl, rows, l.Out, l.In, x, l.Weights, y)
	} else {
		impl.Sgemm(blas.NoTrans, blas.NoTrans, rows, l.Out, l.In, 1, x, l.In, l.Weights, l.Out, 1, y, l.Out)
	}
	if l.Activation == ReLU {
		relu.InPlace(y[:rows*l.Out]) // one pass over the batch
		return
	}
	for r := range rows {
		activate(l.Activation, y[r*l.Out:(r+1)*l.Out])
	}
}

// activate applies a to one row in place.
func activate(a Activation, row []float32) {
	switch a {
	case ReLU:
		relu.InPlace(row)
	case Tanh:
		for j, v := range row {
			row[j] = float32(math.Tanh(float64(v)))
		}
	case Sigmoid:
		for j, v := range row {
			row[j] = float32(1 / (1 + math.Exp(-float64(v))))
		}
	case Softmax:
		softmax(row)
	}
}

// Tiles small enough that gonum's Sgemm computes each one on the calling
// goroutine: it goes parallel from 4 blocks of 64×64 of the output.
const (
	tileRows = 64
	tileCols = 3 * 64
)

// serialGemm computes y += x·w (rows×k times k×n, row-major) tile by tile,
// so that concurrent sessions (replicas) do not each fan out over every core.
func serialGemm(impl blas.Float32, rows, n, k int, x, w, y []float32) {
	for i := 0; i < rows; i += tileRows {
		m := min(tileRows, rows-i)
		for j := 0; j < n; j += tileCols {
			c := min(tileCols, n-j)
			impl.Sgemm(blas.NoTrans, blas.NoTrans, m, c, k, 1, x[i*k:], k, w[j:], n, 1, y[i*n+j:], n)
		}
	}
}
