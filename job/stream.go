package job

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// outputStream writes a file output during a run that resumed nothing,
// beside the parts: the output is written once, not as parts and then a
// merge that reads them back. It writes the records the parts hold (the
// part writer's chunks, as they are) under the schema the merge writes,
// and the merge writes the parts' records as they are stored, so its
// bytes are the merge's: a run killed and resumed, which merges, gives
// the same file.
type outputStream struct {
	output, fingerprint string
	overwrite           bool
	mem                 memory.Allocator
	store               *storage.Opener
	fence               func() error    // asked before the commit
	ctx                 context.Context // the upload's: a cancelled run's creates nothing
	groupBytes          int64           // the row groups' bound (rowGroupBytes)

	w *sink.Writer // made on the first rows

	// inject, set by tests, fails the nth write of the output (the
	// "merge" phase: the output's writing, streamed or merged).
	inject func(phase string, n int) error
	writes int
}

// write writes the next rows of the output (a record of the prediction
// schema, rowColumn dropped).
func (s *outputStream) write(rec arrow.RecordBatch) error {
	if s.w == nil {
		// The merge's schema: the parts', with the job's name.
		md := arrow.NewMetadata([]string{jobKey}, []string{s.fingerprint})
		w, err := sink.Create(s.output, arrow.NewSchema(rec.Schema().Fields(), &md), sink.WithOverwrite(s.overwrite),
			sink.WithAllocator(s.mem), sink.WithOpener(s.store), sink.WithContext(s.ctx), sink.WithRowGroupBytes(s.groupBytes))
		if err != nil {
			return err
		}
		s.w = w
	}
	if s.inject != nil {
		if err := s.inject("merge", s.writes); err != nil {
			return err
		}
	}
	s.writes++
	// The same columns, under the schema with the job's name.
	out := array.NewRecordBatch(s.w.Schema(), rec.Columns(), rec.NumRows())
	defer out.Release()
	return s.w.Write(out)
}

// finish commits the output; false if no row came, when the merge makes
// the empty output.
func (s *outputStream) finish() (bool, error) {
	if s.w == nil {
		return false, nil
	}
	if err := s.fence(); err != nil {
		s.abort()
		return false, err
	}
	return true, s.w.Commit()
}

// abort discards the output written so far.
func (s *outputStream) abort() {
	if s.w != nil {
		s.w.Abort()
	}
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
