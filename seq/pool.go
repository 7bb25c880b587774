package seq

import (
	"fmt"
	"math"
	"strings"
)

// Pooling is how a per-token output becomes one vector a row, as
// sentence-transformers' Pooling module makes it of the row run alone
// (no padding). Several are concatenated ([WithPoolings]).
type Pooling int

const (
	// Mean averages the vectors of the row's attended tokens.
	Mean Pooling = iota
	// CLS takes the first attended token's vector.
	CLS
	// Last takes the last attended token's vector (decoder embeddings).
	Last
	// Max takes each dimension's largest value over the attended tokens.
	Max
	// MeanSqrtLen is the attended tokens' sum divided by the square root
	// of their number.
	MeanSqrtLen
	// WeightedMean weights the t-th attended token (from 1) by t.
	WeightedMean
)

var poolingNames = map[Pooling]string{Mean: "mean", CLS: "cls", Last: "last", Max: "max", MeanSqrtLen: "mean_sqrt_len_tokens", WeightedMean: "weightedmean"}

func (p Pooling) String() string { return poolingNames[p] }

// ParsePooling reads a pooling by its name: mean, cls, last (or
// lasttoken), max, mean_sqrt_len_tokens or weightedmean, as
// sentence-transformers' pooling_mode names them.
func ParsePooling(s string) (Pooling, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "lasttoken" {
		return Last, nil
	}
	for p, name := range poolingNames {
		if name == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("seq: pooling %q: want mean, cls, last, max, mean_sqrt_len_tokens or weightedmean", s)
}

// pool writes into dst (width values) the pooling of one row's token
// vectors hidden (tokens × width values) over the attended tokens
// [first, first+n) of it; sum is scratch of width values. Sums are
// taken in float64: a long row loses nothing to the order of additions.
func (p Pooling) pool(dst, hidden []float32, width, first, n int, sum []float64) {
	row := func(t int) []float32 { return hidden[t*width : (t+1)*width] }
	switch p {
	case CLS:
		copy(dst, row(first))
		return
	case Last:
		copy(dst, row(first+n-1))
		return
	case Max:
		copy(dst, row(first))
		for t := first + 1; t < first+n; t++ {
			for j, v := range row(t) {
				dst[j] = max(dst[j], v)
			}
		}
		return
	}
	clear(sum)
	var weights float64
	for t := range n {
		w := 1.0
		if p == WeightedMean {
			w = float64(t + 1)
		}
		weights += w
		for j, v := range row(first + t) {
			sum[j] += w * float64(v)
		}
	}
	if p == MeanSqrtLen {
		weights = math.Sqrt(weights)
	}
	for j := range dst {
		dst[j] = float32(sum[j] / weights)
	}
}

// Module is a step of a sentence-transformers stack after pooling
// (Dense, Normalize): it maps each row's pooled vector to another.
type Module interface {
	// OutWidth returns the width of the module's output for vectors of
	// width in, or an error if it takes no such vectors.
	OutWidth(in int) (int, error)
	// Apply writes into dst (OutWidth values) the output for src.
	Apply(dst, src []float32)
}

// Normalize scales vectors to unit L2 norm, as torch's F.normalize does
// (its norm floored at 1e-12): sentence-transformers' Normalize module.
type Normalize struct{}

func (Normalize) OutWidth(in int) (int, error) { return in, nil }

func (Normalize) Apply(dst, src []float32) {
	var ss float64
	for _, x := range src {
		ss += float64(x) * float64(x)
	}
	inv := 1 / max(math.Sqrt(ss), 1e-12)
	for i, x := range src {
		dst[i] = float32(float64(x) * inv)
	}
}
