package seq

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// outputs holds a window's output values, one slice an output column,
// in window order.
type outputs struct {
	bufs []*memory.Buffer
	vals [][]float32
}

func newOutputs(mem memory.Allocator, cols []column, rows int) *outputs {
	o := &outputs{}
	for _, c := range cols {
		buf := memory.NewResizableBuffer(mem)
		buf.Resize(rows * c.width * 4)
		vals := arrow.Float32Traits.CastFromBytes(buf.Bytes())
		clear(vals) // padding rows of the window hold zeros
		o.bufs, o.vals = append(o.bufs, buf), append(o.vals, vals)
	}
	return o
}

func (o *outputs) release() {
	for _, b := range o.bufs {
		b.Release()
	}
}

// scratch is a session's room for pooling a row: the pooled vector,
// each module's output, and the sums of a mean.
type scratch struct {
	vecs [][]float32
	sum  []float64
}

// vec returns scratch vector i of n values.
func (s *scratch) vec(i, n int) []float32 {
	for len(s.vecs) <= i {
		s.vecs = append(s.vecs, nil)
	}
	if cap(s.vecs[i]) < n {
		s.vecs[i] = make([]float32, n)
	}
	return s.vecs[i][:n]
}

// scatter copies a sub-batch's results to its rows' places in the
// window; a per-token output is pooled each way, concatenated, and goes
// through the modules.
func (m *Model) scatter(o *outputs, sc *scratch, res [][]float32, sb SubBatch, lengths []int) error {
	outs := m.engine.Outputs()
	if len(res) != len(outs) {
		return fmt.Errorf("the engine returned %d outputs, it declares %d", len(res), len(outs))
	}
	S := sb.Shape.Tokens
	for ci, c := range m.cols {
		out := outs[c.output]
		w := out.Width
		per := w
		if out.PerToken {
			per = S * w
		}
		if len(res[c.output]) != sb.Shape.Rows*per {
			return fmt.Errorf("output %q has %d values, want %d", out.Name, len(res[c.output]), sb.Shape.Rows*per)
		}
		if cap(sc.sum) < w {
			sc.sum = make([]float64, w)
		}
		for k, row := range sb.Rows {
			dst := o.vals[ci][row*c.width : (row+1)*c.width]
			src := res[c.output][k*per : (k+1)*per]
			if !out.PerToken {
				copy(dst, src)
				continue
			}
			first, count := m.span(m.planner.Length(lengths[row]), S)
			vec := sc.vec(0, c.pooled)
			if len(m.modules) == 0 {
				vec = dst
			}
			for p, pooling := range m.poolings {
				pooling.pool(vec[p*w:(p+1)*w], src, w, first, count, sc.sum[:w])
			}
			for i, mod := range m.modules {
				next := dst
				if i < len(m.modules)-1 {
					n, _ := mod.OutWidth(len(vec)) // checked by New
					next = sc.vec(1+i%2, n)
				}
				mod.Apply(next, vec)
				vec = next
			}
		}
	}
	return nil
}

// record makes the window's output record.
func (m *Model) record(o *outputs, rows int) arrow.RecordBatch {
	cols := make([]arrow.Array, len(m.cols))
	for i, c := range m.cols {
		vals := array.NewData(arrow.PrimitiveTypes.Float32, rows*c.width, []*memory.Buffer{nil, o.bufs[i]}, nil, 0, 0)
		list := array.NewData(c.field.Type, rows, []*memory.Buffer{nil}, []arrow.ArrayData{vals}, 0, 0)
		cols[i] = array.MakeFromData(list)
		vals.Release()
		list.Release()
	}
	rec := array.NewRecordBatch(m.schema, cols, int64(rows))
	for _, c := range cols {
		c.Release()
	}
	return rec
}
