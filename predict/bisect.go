package predict

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/pad"
)

// bisect looks for the rows of a failed batch that fail on their own:
// it sets aside a row a row error names and runs the rest, or runs each
// half of the failing rows, padded to an allowed size, and splits parts
// that fail again, down to single rows, which go to the
// WithSetAside function. It returns the model outputs of the rows that
// succeeded and those rows, padded to their own count (no padding rows),
// in input order. If every row fails on its own, the device is failing,
// not the rows: the batch's error stands.
func (s *step) bisect(ctx context.Context, b device.Batch, whole error) (out, rows arrow.RecordBatch, err error) {
	real, _, err := pad.Strip(b.Record)
	if err != nil {
		return nil, nil, err
	}
	defer real.Release()
	var ins, outs []arrow.RecordBatch
	var failed []failure
	defer func() {
		// Every path, a cancelled split's too, which may have found rows
		// that fail alone before it ended.
		releaseAll(ins)
		releaseAll(outs)
		releaseAll(failures(failed))
	}()
	if err := s.split(ctx, b.Index, real, whole, &ins, &outs, &failed); err != nil {
		return nil, nil, err
	}
	if len(failed) == int(real.NumRows()) {
		return nil, nil, whole
	}
	for _, f := range failed {
		s.p.cfg.setAside(f.row, f.err) // borrowed for the call
	}
	// Some rows succeeded, so ins and outs are not empty.
	joined, err := concatRecords(s.p.cfg.mem, ins)
	if err != nil {
		return nil, nil, err
	}
	defer joined.Release()
	if rows, _, err = s.padder.PadTo(joined, int(joined.NumRows())); err != nil {
		return nil, nil, err
	}
	if out, err = concatRecords(s.p.cfg.mem, outs); err != nil {
		rows.Release()
		return nil, nil, err
	}
	return out, rows, nil
}

type failure struct {
	row arrow.RecordBatch
	err error
}

func failures(fs []failure) []arrow.RecordBatch {
	out := make([]arrow.RecordBatch, len(fs))
	for i, f := range fs {
		out[i] = f.row
	}
	return out
}

// split runs rows (which failed together with err) in parts, appending
// what succeeds to ins and outs and single failing rows to failed, in row
// order. A row error that names a row of rows sets that row aside at once
// and runs the rows before and after it; any other error halves the rows.
// A cancelled context ends it.
func (s *step) split(ctx context.Context, index int, rows arrow.RecordBatch, err error, ins, outs *[]arrow.RecordBatch, failed *[]failure) error {
	n := rows.NumRows()
	if n == 1 {
		rows.Retain()
		*failed = append(*failed, failure{rows, err})
		return nil
	}
	parts := [][2]int64{{0, n / 2}, {n / 2, n}}
	named := int64(-1)
	if re := (*device.RowError)(nil); errors.As(err, &re) && re.Row >= 0 && re.Row < n {
		named = re.Row
		parts = [][2]int64{{0, named}, {named, named + 1}, {named + 1, n}}
	}
	for _, r := range parts {
		m := int(r[1] - r[0])
		switch {
		case m == 0:
			continue
		case r[0] == named:
			*failed = append(*failed, failure{rows.NewSlice(r[0], r[1]), alone(err)})
			continue
		}
		half := rows.NewSlice(r[0], r[1])
		rec, padding, perr := s.padder.PadTo(half, s.p.cfg.paddedSize(m))
		if perr != nil {
			half.Release()
			return perr
		}
		out, derr := s.devices.predict(ctx, device.Batch{Index: index, Record: rec, Padding: padding})
		rec.Release()
		switch {
		case derr == nil:
			*ins = append(*ins, half)
			*outs = append(*outs, out.NewSlice(0, int64(m)))
			out.Release()
			continue
		case ctx.Err() != nil || errors.Is(derr, context.Canceled):
			half.Release()
			return derr
		}
		err := s.split(ctx, index, half, derr, ins, outs, failed)
		half.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// alone restates the row error of a batch as its row's own, row 0 of a
// one-row record, as if the row had run alone.
func alone(err error) error {
	var re *device.RowError
	errors.As(err, &re)
	column := ""
	for e := err; e != nil && column == ""; e = errors.Unwrap(e) {
		if r, ok := e.(*device.RowError); ok {
			column = r.Column
		}
	}
	return &device.RowError{Row: 0, Column: column, Err: re.Cause()}
}
