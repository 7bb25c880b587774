package head

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// columns makes the head's columns of rows rows of logits.
func (m *Model) columns(mem memory.Allocator, logits []float32, rows int) []arrow.Array {
	w, f := m.width, m.head.Function
	if w == 1 {
		b := array.NewFloat32Builder(mem)
		defer b.Release()
		for _, v := range logits[:rows] {
			b.Append(apply1(f, v))
		}
		return []arrow.Array{b.NewArray()}
	}
	probs := array.NewFixedSizeListBuilderWithField(mem, int32(w), arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32})
	classes, scores, labels := array.NewInt64Builder(mem), array.NewFloat32Builder(mem), array.NewStringBuilder(mem)
	defer func() {
		probs.Release()
		classes.Release()
		scores.Release()
		labels.Release()
	}()
	vals := probs.ValueBuilder().(*array.Float32Builder)
	p := make([]float32, w)
	for r := range rows {
		row := logits[r*w : (r+1)*w]
		best := argmax(row)
		switch f {
		case Softmax:
			softmax(p, row, best)
		default:
			for i, v := range row {
				p[i] = apply1(f, v)
			}
		}
		probs.Append(true)
		vals.AppendValues(p, nil)
		classes.Append(int64(best))
		scores.Append(p[best])
		if len(m.head.Labels) > 0 {
			labels.Append(m.head.Labels[best])
		}
	}
	var out []arrow.Array
	if f != None {
		out = append(out, probs.NewArray())
	}
	out = append(out, classes.NewArray(), scores.NewArray())
	if len(m.head.Labels) > 0 {
		out = append(out, labels.NewArray())
	}
	return out
}

// apply1 applies a function to one logit (softmax of one value is 1,
// which no pipeline asks for: one logit gets the sigmoid, as Pick says).
func apply1(f Function, v float32) float32 {
	if f == None {
		return v
	}
	return float32(1 / (1 + math.Exp(-float64(v))))
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// softmax writes the softmax of logits into dst, shifted by the largest
// (best) for range.
func softmax(dst, logits []float32, best int) {
	var sum float64
	for i, v := range logits {
		e := math.Exp(float64(v - logits[best]))
		dst[i] = float32(e)
		sum += e
	}
	for i := range dst {
		dst[i] = float32(float64(dst[i]) / sum)
	}
}
