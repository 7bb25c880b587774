package seq

import (
	"fmt"
	"math"
	"strings"
)

// Pooling is how a per-token output becomes one vector a row.
type Pooling int

const (
	// Mean averages the vectors of the row's attended tokens
	// (sentence-transformers' mean pooling).
	Mean Pooling = iota
	// CLS takes the first token's vector.
	CLS
	// Last takes the last attended token's vector (decoder embeddings).
	Last
)

func (p Pooling) String() string {
	switch p {
	case CLS:
		return "cls"
	case Last:
		return "last"
	}
	return "mean"
}

// ParsePooling reads "mean", "cls" or "last".
func ParsePooling(s string) (Pooling, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "mean":
		return Mean, nil
	case "cls":
		return CLS, nil
	case "last", "lasttoken":
		return Last, nil
	}
	return 0, fmt.Errorf("seq: pooling %q: want mean, cls or last", s)
}

// pool writes into dst (width values) the pooling of one row's token
// vectors hidden (tokens × width values) over the attended tokens
// [first, first+n) of it.
func (p Pooling) pool(dst, hidden []float32, width, first, n int) {
	switch p {
	case CLS:
		copy(dst, hidden[first*width:(first+1)*width])
	case Last:
		last := first + n - 1
		copy(dst, hidden[last*width:(last+1)*width])
	default:
		// Summed in float64: the mean of long rows loses nothing to the
		// order of additions.
		sum := make([]float64, width)
		for t := first; t < first+n; t++ {
			for j, v := range hidden[t*width : (t+1)*width] {
				sum[j] += float64(v)
			}
		}
		for j := range dst {
			dst[j] = float32(sum[j] / float64(n))
		}
	}
}

// normalize scales v to unit L2 norm (a zero vector stays zero).
func normalize(v []float32) {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}

// softmax writes the softmax of logits into dst and returns the index
// of the largest.
func softmax(dst, logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	var sum float64
	for i, v := range logits {
		e := math.Exp(float64(v - logits[best]))
		dst[i] = float32(e)
		sum += e
	}
	for i := range dst {
		dst[i] = float32(float64(dst[i]) / sum)
	}
	return best
}
