package serve

import (
	"fmt"
	"reflect"

	"github.com/drainpipe/drainpipe/seq"
)

// tokenRows reads a sequence model's [rows, tokens] token tensor as rows
// of tokens: with an attention_mask of the same shape (a batch the
// client's tokenizer padded, right or left), each row's attended slots,
// which must be one run; without one, every slot, and a request of more
// than one row whose rows begin or end in the pad id is refused, as its
// padding would be attended as tokens. It returns the tokens, gathered,
// and each row's end (nil: every row is the shape's width).
func (m *model) tokenRows(t, mask *tensor) (*tensor, []int32, error) {
	rows, width := int(t.shape[0]), int(t.shape[1])
	if mask == nil {
		if rows < 2 || width == 0 {
			return t, nil, nil
		}
		pad := m.sequence.PadID()
		v := reflect.ValueOf(t.data)
		for r := range rows {
			first, last := v.Index(r*width), v.Index(r*width+width-1)
			if first.CanInt() && (first.Int() == pad || last.Int() == pad) {
				return nil, nil, fmt.Errorf("input %q: row %d begins or ends in the pad id %d: a request of rows of other lengths sends %s (1 for tokens, 0 for padding), or one row a request", t.name, r, pad, seq.AttentionMask)
			}
		}
		return t, nil, nil
	}
	if len(mask.shape) != 2 || mask.shape[0] != t.shape[0] || mask.shape[1] != t.shape[1] {
		return nil, nil, fmt.Errorf("input %q: shape %v, but input %q has %v", mask.name, mask.shape, t.name, t.shape)
	}
	attended := func(i int) (bool, error) {
		var v int64
		switch d := mask.data.(type) {
		case []int64:
			v = d[i]
		case []int32:
			v = int64(d[i])
		case []bool:
			return d[i], nil
		default:
			return false, fmt.Errorf("input %q: datatype %s, want INT64, INT32 or BOOL", mask.name, mask.datatype)
		}
		if v != 0 && v != 1 {
			return false, fmt.Errorf("input %q: element %d (row %d) is %d, want 0 or 1", mask.name, i, i/width, v)
		}
		return v == 1, nil
	}
	src := reflect.ValueOf(t.data)
	out := reflect.MakeSlice(src.Type(), 0, src.Len())
	offsets := make([]int32, 1, rows+1)
	for r := range rows {
		start, end := -1, -1
		for j := range width {
			on, err := attended(r*width + j)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case on && start < 0:
				start = j
			case on && end >= 0:
				return nil, nil, fmt.Errorf("input %q: row %d attends slots %d…%d and %d: padding goes before a row's tokens or after them, not among them", mask.name, r, start, end-1, j)
			case !on && start >= 0 && end < 0:
				end = j
			}
		}
		if start < 0 {
			return nil, nil, fmt.Errorf("input %q: row %d attends no slot", mask.name, r)
		}
		if end < 0 {
			end = width
		}
		out = reflect.AppendSlice(out, src.Slice(r*width+start, r*width+end))
		offsets = append(offsets, int32(out.Len()))
	}
	return &tensor{name: t.name, datatype: t.datatype, shape: t.shape, data: out.Interface()}, offsets, nil
}
