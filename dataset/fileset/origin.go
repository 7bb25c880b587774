package fileset

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/drainpipe/drainpipe/dataset"
)

// Origins maps the rows a [Read] dataset yields back to their files, so
// an error about dataset row r can name the file and the row in it. Give
// one to Read or Open with [WithOrigins]; it describes the latest range over the
// dataset and is safe to read while another goroutine ranges.
type Origins struct {
	mu    sync.Mutex
	spans []span
	rows  int64 // rows yielded in the current range
}

// Origin is where a row came from.
type Origin struct {
	Path string
	// Row is the row in the file, from 0 (for CSV, after the header); -1
	// when only Unit is known.
	Row int64
	// Unit names the part of the file read when Row is unknown (an IPC
	// record batch read on its own by a shard).
	Unit string
	// Line is the row's line in a text file (CSV), from 1; 0 otherwise.
	Line int64
}

func (o Origin) String() string {
	if o.Line > 0 {
		return fmt.Sprintf("%s, line %d", o.Path, o.Line)
	}
	if o.Row >= 0 {
		return fmt.Sprintf("%s, row %d", o.Path, o.Row)
	}
	return fmt.Sprintf("%s, %s", o.Path, o.Unit)
}

// span is a run of consecutive rows of one file.
type span struct {
	start, n int64 // dataset rows
	path     string
	fileRow  int64 // of the first row, or -1
	unit     string
	text     bool // a CSV file: rows have lines
}

// run is a run of consecutive file rows in a record a reader yields.
type run struct {
	n       int64
	fileRow int64 // -1 if unknown
	unit    string
	text    bool // a CSV file: rows have lines
}

func (o *Origins) reset() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.spans, o.rows = o.spans[:0], 0
	o.mu.Unlock()
}

func (o *Origins) add(path string, runs []run) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range runs {
		o.spans = append(o.spans, span{start: o.rows, n: r.n, path: path, fileRow: r.fileRow, unit: r.unit, text: r.text})
		o.rows += r.n
	}
}

// Locate returns the origin of dataset row r, if the latest range has
// reached it.
func (o *Origins) Locate(r int64) (Origin, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := sort.Search(len(o.spans), func(i int) bool { return o.spans[i].start+o.spans[i].n > r })
	if i == len(o.spans) || r < o.spans[i].start {
		return Origin{}, false
	}
	s := o.spans[i]
	if s.fileRow < 0 {
		return Origin{Path: s.path, Row: -1, Unit: fmt.Sprintf("%s, row %d of it", s.unit, r-s.start)}, true
	}
	at := Origin{Path: s.path, Row: s.fileRow + r - s.start}
	if s.text {
		at.Line = csvLine(at.Row)
	}
	return at, true
}

// LocateError returns err as a [LocatedError] naming the file and file
// row of the row it is about: the outermost [dataset.RowError] in its
// chain, whose Row plus offset counts the rows the dataset yielded (offset
// is the rows skipped before, or the first row of the record the error is
// about). An error about no row, or a row o does not know, comes back as
// it is.
func (o *Origins) LocateError(err error, offset int64) error {
	var re *dataset.RowError
	if !errors.As(err, &re) {
		return err
	}
	at, ok := o.Locate(re.Row + offset)
	if !ok {
		return err
	}
	column := ""
	for r := re; column == "" && r != nil; {
		column = r.Column
		r, _ = r.Err.(*dataset.RowError)
	}
	return &LocatedError{Origin: at, Column: column, Err: err}
}

// LocatedError is an error about one row, named by its file and file row.
type LocatedError struct {
	Origin Origin
	Column string // the column at fault, if one is
	Err    error  // the error, with its row error in its chain
}

// Error names the file, row and column, and what is wrong with the row;
// the dataset's own row number is left out.
func (e *LocatedError) Error() string {
	cause := e.Err
	if re := (*dataset.RowError)(nil); errors.As(e.Err, &re) {
		cause = re.Cause()
	}
	if e.Column == "" {
		return fmt.Sprintf("%s: %v", e.Origin, cause)
	}
	return fmt.Sprintf("%s, column %q: %v", e.Origin, e.Column, cause)
}

func (e *LocatedError) Unwrap() error { return e.Err }

// WithOrigins records, in o, where each row of the dataset comes from.
func WithOrigins(o *Origins) Option { return func(c *filesConfig) { c.origins = o } }
