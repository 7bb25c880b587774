package seq

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/drainpipe/drainpipe/device"
)

type session struct {
	m            *Model
	engine       EngineSession
	mem          memory.Allocator
	scratchBatch Batch // every sub-batch's, grown to the largest run
	scratch      scratch
	down         bool
}

func (s *session) Shutdown(ctx context.Context) error {
	if s.down {
		return errors.New("seq: shutdown twice")
	}
	s.down = true
	return s.engine.Shutdown(ctx)
}

// Predict runs one window.
func (s *session) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	m := s.m
	schema := b.Record.Schema()
	var col, typeCol arrow.Array
	var textsCut int64 // texts the encoder truncated
	if m.text != "" {
		ids, types, cut, err := s.encodeText(ctx, b)
		if err != nil {
			return nil, err
		}
		textsCut = cut
		defer ids.Release()
		col = ids
		if types != nil {
			defer types.Release()
			typeCol = types
		}
	} else {
		col = b.Record.Column(schema.FieldIndices(m.tokens)[0])
		if m.typeIDs != "" {
			typeCol = b.Record.Column(schema.FieldIndices(m.typeIDs)[0])
		}
	}
	toks, err := newTokenRows(col)
	if err != nil {
		return nil, err
	}
	var types *tokenRows
	if typeCol != nil {
		if types, err = newTokenRows(typeCol); err != nil {
			return nil, err
		}
	}
	live := b.Rows()
	lengths := make([]int, live)
	st := Stats{Truncated: textsCut}
	for i := range live {
		n, err := toks.length(i)
		if err == nil && types != nil {
			if tn, terr := types.length(i); terr != nil || tn != n {
				err = cmp.Or(terr, fmt.Errorf("%d type ids for %d tokens", tn, n))
				return nil, &device.RowError{Row: int64(i), Column: m.typeIDs, Err: err}
			}
		}
		if err == nil && n > m.planner.Length(n) {
			if m.refuseLong {
				err = fmt.Errorf("%w: %d tokens, the longest is %d", ErrTooLong, n, m.planner.Length(n))
			}
			st.Truncated++
		}
		// Every row's ids are checked before any sub-batch runs: a bad
		// row costs its window one run, not the sub-batches before it.
		if err == nil {
			err = toks.check(i, m.planner.Length(n), m.vocab)
		}
		if err == nil && types != nil {
			if terr := types.check(i, m.planner.Length(n), 0); terr != nil {
				return nil, &device.RowError{Row: int64(i), Column: m.typeIDs, Err: terr}
			}
		}
		if err != nil {
			return nil, &device.RowError{Row: int64(i), Column: m.tokens, Err: err}
		}
		lengths[i] = n
	}
	var plan []SubBatch
	if m.plan != nil {
		cut := make([]int, len(lengths))
		for i, n := range lengths {
			cut[i] = m.planner.Length(n)
		}
		plan, err = m.plan(cut)
	} else {
		plan, err = m.planner.Plan(lengths)
	}
	if err != nil {
		return nil, err
	}
	if checkPlans || m.plan != nil {
		if err := checkPlan(plan, lengths, m.planner, m.shapes, m.plan == nil); err != nil {
			return nil, fmt.Errorf("seq: window %d: %w", b.Index, err)
		}
	}
	plan = largestFirst(plan)
	rows := int(b.Record.NumRows())
	outs := newOutputs(s.mem, m.cols, rows)
	defer outs.release()
	w := &window{ctx: ctx, index: b.Index, plan: plan, toks: toks, types: types, lengths: lengths, outs: outs}
	if err := s.run(w); err != nil {
		return nil, err
	}
	st.Shapes = map[Shape]int64{}
	for _, sb := range plan {
		st.SubBatches++
		st.Slots += int64(sb.Shape.Slots())
		st.Shapes[sb.Shape]++
		for _, r := range sb.Rows {
			st.Tokens += int64(m.planner.Length(lengths[r]))
		}
	}
	st.Rows = int64(live)
	m.add(st)
	observeWindow(ctx, st)
	return m.record(outs, rows), nil
}

// encodeText encodes the text of a window's real rows (WithText) into a
// token column, and with WithTextPair each row's pair of texts into
// token and type-id columns; padding rows are empty lists. A null text
// is a row error. A window whose context ends stops between rows: a
// request's texts are not tokenized for a caller that has gone. cut
// counts the texts the encoder truncated.
func (s *session) encodeText(ctx context.Context, b device.Batch) (ids, types arrow.Array, cut int64, err error) {
	schema := b.Record.Schema()
	texts := b.Record.Column(schema.FieldIndices(s.m.text)[0])
	var pairs arrow.Array
	if s.m.textPair != "" {
		pairs = b.Record.Column(schema.FieldIndices(s.m.textPair)[0])
	}
	lb, tb := array.NewListBuilder(s.mem, arrow.PrimitiveTypes.Int64), array.NewListBuilder(s.mem, arrow.PrimitiveTypes.Int64)
	defer lb.Release()
	defer tb.Release()
	vals, tvals := lb.ValueBuilder().(*array.Int64Builder), tb.ValueBuilder().(*array.Int64Builder)
	for i := range int(b.Record.NumRows()) {
		lb.Append(true)
		tb.Append(true)
		if i >= b.Rows() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, err
		}
		text, err := stringAt(texts, i, s.m.text)
		if err != nil {
			return nil, nil, 0, err
		}
		if pairs == nil {
			row, truncated, err := s.m.encode(text)
			if err != nil {
				return nil, nil, 0, &device.RowError{Row: int64(i), Column: s.m.text, Err: err}
			}
			vals.AppendValues(row, nil)
			if truncated {
				cut++
			}
			continue
		}
		pair, err := stringAt(pairs, i, s.m.textPair)
		if err != nil {
			return nil, nil, 0, err
		}
		row, rowTypes, truncated, err := s.m.encodePair(text, pair)
		if err != nil {
			return nil, nil, 0, &device.RowError{Row: int64(i), Column: s.m.text, Err: err}
		}
		vals.AppendValues(row, nil)
		tvals.AppendValues(rowTypes, nil)
		if truncated {
			cut++
		}
	}
	ids = lb.NewArray()
	if pairs != nil {
		types = tb.NewArray()
	}
	return ids, types, cut, nil
}

// stringAt returns row i of a string column, or a row error if null.
func stringAt(col arrow.Array, i int, name string) (string, error) {
	if col.IsNull(i) {
		return "", &device.RowError{Row: int64(i), Column: name, Err: errors.New("null text")}
	}
	switch t := col.(type) {
	case *array.String:
		return t.Value(i), nil
	case *array.LargeString:
		return t.Value(i), nil
	}
	return "", &device.RowError{Row: int64(i), Column: name, Err: fmt.Errorf("%s is not text", col.DataType())}
}

// batch returns the session's one sub-batch, shaped: it is grown to the
// largest shape run and reused, so a session holds one, not one a shape.
func (s *session) batch(sh Shape) *Batch {
	b := &s.scratchBatch
	n := sh.Slots()
	if cap(b.IDs) < n {
		b.IDs, b.Mask, b.TypeIDs, b.Positions = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	}
	b.Shape = sh
	b.IDs, b.Mask, b.TypeIDs, b.Positions = b.IDs[:n], b.Mask[:n], b.TypeIDs[:n], b.Positions[:n]
	return b
}

// span returns where a row's n tokens sit among a sub-batch row's
// tokens slots: from first on. A row of no tokens runs as one padding
// token, attended, as padding rows do (a fully masked row gives NaN in
// exports whose mask adds -inf).
func (m *Model) span(n, tokens int) (first, count int) {
	count = max(n, 1)
	if m.left {
		return tokens - count, count
	}
	return 0, count
}

// fill writes a sub-batch's ids, mask, type ids and position ids, of
// rows already checked.
func (m *Model) fill(b *Batch, sb SubBatch, toks, types *tokenRows, lengths []int) {
	S := sb.Shape.Tokens
	for k := range sb.Shape.Rows {
		ids, mask := b.IDs[k*S:(k+1)*S], b.Mask[k*S:(k+1)*S]
		typ, pos := b.TypeIDs[k*S:(k+1)*S], b.Positions[k*S:(k+1)*S]
		// RoBERTa's family gives padding slots padding_idx (start − 1).
		padPos := max(m.positionStart-1, 0)
		for j := range ids {
			ids[j], mask[j], typ[j], pos[j] = m.padID, 0, 0, padPos
		}
		n := 0
		if k < len(sb.Rows) {
			n = m.planner.Length(lengths[sb.Rows[k]])
		}
		first, count := m.span(n, S)
		for j := range count {
			mask[first+j], pos[first+j] = 1, m.positionStart+int64(j)
		}
		if !m.left && m.positionStart == 0 {
			for j := first + count; j < S; j++ {
				pos[j] = int64(j) // as Hugging Face's default position ids
			}
		}
		if n == 0 {
			continue
		}
		row := sb.Rows[k]
		toks.copyRow(row, ids[first:first+n])
		if types != nil {
			types.copyRow(row, typ[first:first+n])
		}
	}
}
