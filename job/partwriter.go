package job

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.opentelemetry.io/otel/trace"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/sink"
)

// partWriter cuts the prediction stream into parts of PartRows rows,
// written in records of chunkRows rows counted from the part's start (the
// last of a part shorter), so a part's bytes do not depend on how the rows
// arrived. It drops rowColumn, after noting the input rows each part
// covers.
type partWriter struct {
	inject func(phase string, n int) error // tests' failures
	parts  *parts
	stream *outputStream // a fresh run's file output, written as it goes; nil otherwise
	mem    memory.Allocator
	aside  *aside // SetAside mode, else nil
	schema *arrow.Schema
	cur    *sink.Writer
	name   string // cur's, in the parts folder
	rows   int64  // rows in cur

	// The job's span's context, and the current part's span.
	ctx    context.Context
	tracer trace.Tracer
	span   trace.Span

	pending     []arrow.RecordBatch // less than a chunk, waiting
	pendingRows int
	lastRow     int64 // input row of the last row written
}

// chunkRows is the rows of a record written to a part. A writer's cost a
// record (Parquet's levels and pages, IPC's messages) is paid once per
// chunk, not once per batch: records of a batch of 256 rows made a folder
// output's writing a quarter dearer.
const chunkRows = 1 << 14

func (w *partWriter) write(rec arrow.RecordBatch) error {
	if w.schema == nil {
		w.schema = predictionSchema(rec.Schema())
	}
	for off := int64(0); off < rec.NumRows(); {
		// A chunk ends at chunkRows, or at the end of the part.
		inPart := int(w.rows)
		if w.cur == nil {
			inPart = 0 // the next part's first chunk
		}
		chunk := min(chunkRows, w.parts.m.PartRows-inPart)
		take := min(int64(chunk-w.pendingRows), rec.NumRows()-off)
		w.pending = append(w.pending, rec.NewSlice(off, off+take))
		w.pendingRows += int(take)
		off += take
		if w.pendingRows == chunk {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the pending rows as one record to the current part (made
// if need be), and commits it when full.
func (w *partWriter) flush() error {
	pending := w.pending
	w.pending, w.pendingRows = nil, 0
	defer func() {
		for _, r := range pending {
			r.Release()
		}
	}()
	if len(pending) == 0 {
		return nil
	}
	rec, err := dataset.Concat(w.mem, pending[0].Schema(), pending)
	if err != nil {
		return err
	}
	defer rec.Release()
	rows := rec.Column(rec.Schema().FieldIndices(rowColumn)[0]).(*array.Int64)
	w.lastRow = rows.Value(rows.Len() - 1)
	out := predictions(rec, w.schema)
	defer out.Release()
	if w.cur == nil {
		name := w.parts.partName(len(w.parts.m.Parts))
		cur, err := sink.Create(w.parts.path(name), w.schema, sink.WithAllocator(w.mem), sink.WithOverwrite(true), sink.WithOpener(w.parts.store), sink.WithRowGroupBytes(w.parts.groupBytes),
			sink.WithContext(w.parts.live))
		if err != nil {
			return err
		}
		w.cur, w.name, w.rows = cur, name, 0
		w.startSpan()
	}
	if err := w.cur.Write(out); err != nil {
		return err
	}
	if w.stream != nil {
		if err := w.stream.write(out); err != nil {
			return err
		}
	}
	w.rows += out.NumRows()
	if w.rows == int64(w.parts.m.PartRows) {
		return w.commit(w.lastRow + 1)
	}
	return nil
}

// commit makes the current part (if any) and its set-aside rows durable,
// and lists them in the manifest: the part covers input rows up to inEnd.
func (w *partWriter) commit(inEnd int64) error {
	if err := w.parts.fenced(); err != nil {
		return err
	}
	i := len(w.parts.m.Parts)
	pt := part{InEnd: inEnd}
	if w.aside != nil {
		if rows := w.aside.take(inEnd); len(rows) > 0 {
			pt.Aside, pt.AsideRows = asideName(i), int64(len(rows))
			var err error
			if pt.AsideSize, err = w.aside.writePart(w.parts.layout, pt.Aside, rows); err != nil {
				if w.cur != nil {
					w.cur.Abort()
					w.cur = nil
				}
				return err
			}
		}
	}
	if cur := w.cur; cur != nil {
		w.cur = nil
		if w.inject != nil {
			if err := w.inject("part", i); err != nil {
				cur.Abort()
				return err
			}
		}
		if err := cur.Commit(); err != nil {
			return err
		}
		pt.File, pt.Rows, pt.Size = w.name, w.rows, cur.Size()
	}
	if pt.File == "" && pt.Aside == "" {
		return nil
	}
	w.startSpan() // a part of rows set aside alone has none yet
	err := w.parts.add(pt)
	if w.span != nil {
		w.span.SetAttributes(partAttributes(i, pt, false)...)
		endSpan(w.span, err)
		w.span = nil
	}
	return err
}

// startSpan starts the current part's span, if it has none.
func (w *partWriter) startSpan() {
	if w.span == nil && w.tracer != nil {
		_, w.span = w.tracer.Start(w.ctx, "part")
	}
}

// finish writes what is pending and commits the last, short part, which
// covers every row read (inEnd).
func (w *partWriter) finish(inEnd int64) error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.commit(inEnd)
}

// setAside returns the rows set aside in the committed parts.
func (w *partWriter) setAside() int64 { return w.parts.asideRows() }

// abort discards the part being written and what is pending.
func (w *partWriter) abort() {
	if w.stream != nil {
		w.stream.abort()
	}
	for _, r := range w.pending {
		r.Release()
	}
	w.pending, w.pendingRows = nil, 0
	if w.cur != nil {
		w.cur.Abort()
		w.cur = nil
	}
	if w.span != nil {
		endSpan(w.span, errors.New("part not committed"))
		w.span = nil
	}
}
