package fileset

import (
	"fmt"
	"sort"
	"sync"
)

// Origins maps the rows a [Files] dataset yields back to their files, so
// an error about dataset row r can name the file and the row in it. Give
// one to Files with [WithOrigins]; it describes the latest range over the
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
}

func (o Origin) String() string {
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
}

// run is a run of consecutive file rows in a record a reader yields.
type run struct {
	n       int64
	fileRow int64 // -1 if unknown
	unit    string
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
		o.spans = append(o.spans, span{start: o.rows, n: r.n, path: path, fileRow: r.fileRow, unit: r.unit})
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
	return Origin{Path: s.path, Row: s.fileRow + r - s.start}, true
}

// WithOrigins records, in o, where each row of the dataset comes from.
func WithOrigins(o *Origins) Option { return func(c *filesConfig) { c.origins = o } }
