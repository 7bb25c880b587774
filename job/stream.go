package job

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// outputStream writes a file output during a run that resumed nothing,
// beside the parts: the output is written once, not as parts and then a
// merge that reads them back. It writes the records the merge writes
// (rowGroupRows rows each, the last shorter) under the schema it writes,
// so its bytes are the merge's: a run killed and resumed, which merges,
// gives the same file.
type outputStream struct {
	output, fingerprint string
	overwrite           bool
	mem                 memory.Allocator
	store               *storage.Opener
	fence               func() error    // asked before the commit
	ctx                 context.Context // the upload's: a cancelled run's creates nothing

	w           *sink.Writer // made on the first rows
	pending     []arrow.RecordBatch
	pendingRows int64

	// inject, set by tests, fails the nth write of the output (the
	// "merge" phase: the output's writing, streamed or merged).
	inject func(phase string, n int) error
	writes int
}

// write takes the next rows of the output (records of the prediction
// schema, rowColumn dropped); it holds its own reference.
func (s *outputStream) write(rec arrow.RecordBatch) error {
	if s.w == nil {
		// The merge's schema: the parts', with the job's name.
		md := arrow.NewMetadata([]string{jobKey}, []string{s.fingerprint})
		w, err := sink.Create(s.output, arrow.NewSchema(rec.Schema().Fields(), &md), sink.WithOverwrite(s.overwrite),
			sink.WithAllocator(s.mem), sink.WithOpener(s.store), sink.WithContext(s.ctx))
		if err != nil {
			return err
		}
		s.w = w
	}
	rec.Retain()
	s.pending = append(s.pending, rec)
	s.pendingRows += rec.NumRows()
	for s.pendingRows >= rowGroupRows {
		if err := s.flush(rowGroupRows); err != nil {
			return err
		}
	}
	return nil
}

// flush writes the first n pending rows as one record.
func (s *outputStream) flush(n int64) error {
	if s.inject != nil {
		if err := s.inject("merge", s.writes); err != nil {
			return err
		}
	}
	s.writes++
	var take, keep []arrow.RecordBatch
	left := n
	for _, r := range s.pending {
		switch {
		case left == 0:
			keep = append(keep, r)
		case r.NumRows() <= left:
			take = append(take, r)
			left -= r.NumRows()
		default:
			take = append(take, r.NewSlice(0, left))
			keep = append(keep, r.NewSlice(left, r.NumRows()))
			r.Release()
			left = 0
		}
	}
	s.pending, s.pendingRows = keep, s.pendingRows-n
	defer releaseAll(take)
	joined, err := dataset.Concat(s.mem, take[0].Schema(), take)
	if err != nil {
		return err
	}
	defer joined.Release()
	out := joined
	if !joined.Schema().Equal(s.w.Schema()) {
		// The same columns, under the schema with the job's name.
		out = array.NewRecordBatch(s.w.Schema(), joined.Columns(), joined.NumRows())
		defer out.Release()
	}
	return s.w.Write(out)
}

// finish writes what is pending and commits the output; false if no row
// came, when the merge makes the empty output.
func (s *outputStream) finish() (bool, error) {
	if s.w == nil {
		return false, nil
	}
	if s.pendingRows > 0 {
		if err := s.flush(s.pendingRows); err != nil {
			s.abort()
			return false, err
		}
	}
	if err := s.fence(); err != nil {
		s.abort()
		return false, err
	}
	return true, s.w.Commit()
}

// abort discards the output written so far.
func (s *outputStream) abort() {
	releaseAll(s.pending)
	s.pending, s.pendingRows = nil, 0
	if s.w != nil {
		s.w.Abort()
	}
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
