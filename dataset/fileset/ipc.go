package fileset

import (
	"fmt"
	"io"
	"iter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/storage"
)

type ipcReader struct {
	f      storage.File
	file   *ipc.FileReader // IPC file format, random access by batch
	stream *ipc.Reader     // IPC stream format
	full   *arrow.Schema
	out    *arrow.Schema
	c      *filesConfig
}

func (c *filesConfig) openIPC(path string, mem memory.Allocator) (fileReader, error) {
	f, err := c.opener.Open(c.ctx, path)
	if err != nil {
		return nil, err
	}
	size := f.Size()
	if err := checkIPCMetadata(f, size, c.format == format.IPCFile); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	// No message of a file is longer than the file.
	r := &ipcReader{f: f, c: c}
	if c.format == format.IPCFile {
		if storage.IsURL(path) {
			// The reader asks for each message's metadata, then its body:
			// from an object, a request for each would be most of the
			// read's time.
			f = storage.ReadAhead(f, 8<<20)
		}
		r.file, err = ipc.NewFileReader(f, ipc.WithAllocator(mem), ipc.WithMetadataSizeLimit(size), ipc.WithBodySizeLimit(size))
		if err == nil {
			r.full = r.file.Schema()
		}
	} else {
		r.stream, err = boundedIPCReader(f, size, mem)
		if err == nil {
			r.full = r.stream.Schema()
		}
	}
	if err == nil {
		r.out, err = projected(r.full, c.columns)
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ipcReader) schema() *arrow.Schema { return r.out }

// declared is unknown: IPC footers and streams do not count rows.
func (r *ipcReader) declared(func(int) bool) int64 { return -1 }

func (r *ipcReader) close() {
	if r.file != nil {
		r.file.Close()
	}
	if r.stream != nil {
		r.stream.Release()
	}
	r.f.Close()
}

// emit yields record batch i of the file, after checking that its arrays
// are what their lengths say: arrow-go's IPC reader trusts the lengths,
// offsets and child sizes it reads, so a fixed_size_list child shorter
// than its rows need (which Arrow JS writes without a complaint) would
// read with its values shifted.
func (r *ipcReader) emit(i int, rec arrow.RecordBatch, at run, yield func(piece, error) bool) bool {
	for c, col := range rec.Columns() {
		if err := validate(col); err != nil {
			return yield(piece{}, fmt.Errorf("%w: record batch %d, column %q: %v", ErrUnreadable, i, rec.Schema().Field(c).Name, err))
		}
	}
	at.n = rec.NumRows()
	if r.c.columns == nil {
		return yield(piece{rec, []run{at}}, nil)
	}
	sel := selectColumns(rec, r.out)
	defer sel.Release()
	return yield(piece{sel, []run{at}}, nil)
}

func (r *ipcReader) records(mine func(int) bool) iter.Seq2[piece, error] {
	return func(yield func(piece, error) bool) {
		if r.file != nil {
			// A file's record batches are read one by one: the file rows are
			// known while every earlier batch was read too.
			row, known := int64(0), true
			for i := range r.file.NumRecords() {
				if !mine(i) {
					known = false
					continue
				}
				rec, err := r.file.RecordBatchAt(i)
				if err != nil {
					yield(piece{}, fmt.Errorf("record batch %d: %w", i, err))
					return
				}
				at := run{fileRow: row, unit: fmt.Sprintf("record batch %d", i)}
				if !known {
					at.fileRow = -1
				}
				row += rec.NumRows()
				ok := r.emit(i, rec, at, yield)
				rec.Release()
				if !ok {
					return
				}
			}
			return
		}
		i, row := 0, int64(0)
		for ; r.stream.Next(); i++ {
			rec := r.stream.RecordBatch()
			if mine(i) && !r.emit(i, rec, run{fileRow: row}, yield) {
				return
			}
			row += rec.NumRows()
		}
		if err := r.stream.Err(); err != nil {
			yield(piece{}, fmt.Errorf("record batch %d: %w", i, err))
			return
		}
	}
}

// boundedIPCReader reads an IPC stream whose messages are at most limit
// bytes long. (ipc.NewReader drops the size limits it is given, as of
// arrow-go v18.8.0; a message reader keeps them.)
func boundedIPCReader(r io.Reader, limit int64, mem memory.Allocator) (*ipc.Reader, error) {
	// The reader takes the message reader's reference and releases it.
	mr := ipc.NewMessageReader(r, ipc.WithAllocator(mem), ipc.WithMetadataSizeLimit(limit), ipc.WithBodySizeLimit(limit))
	return ipc.NewReaderFromMessageReader(mr, ipc.WithAllocator(mem))
}
