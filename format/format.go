// Package format names the file formats drainpipe reads and writes, and
// tells them by a file's extension: one home for the dataset sources and
// the sinks.
package format

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrUnknown reports a file name whose extension names no format.
var ErrUnknown = errors.New("format: unknown file format")

// Format is a file format.
type Format int

const (
	// Auto picks the format from the file name (Of).
	Auto Format = iota
	// Parquet: .parquet, .pq.
	Parquet
	// IPCFile is the Arrow IPC file format (Feather v2): .arrow, .ipc, .feather.
	IPCFile
	// IPCStream is the Arrow IPC stream format: .arrows.
	IPCStream
	// CSV with a header line: .csv. Read only.
	CSV
)

func (f Format) String() string {
	if f < Auto || f > CSV {
		return fmt.Sprintf("format(%d)", int(f))
	}
	return [...]string{"auto", "parquet", "arrow-file", "arrow-stream", "csv"}[f]
}

// Of returns the format of a file name by its extension.
func Of(path string) (Format, error) {
	if i := strings.Index(path, "://"); i > 0 {
		// A URL: the extension of its key, not of its query.
		path, _, _ = strings.Cut(path, "?")
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet", ".pq":
		return Parquet, nil
	case ".arrow", ".ipc", ".feather":
		return IPCFile, nil
	case ".arrows":
		return IPCStream, nil
	case ".csv":
		return CSV, nil
	}
	return Auto, fmt.Errorf("%w: %s: extension %q (want .parquet, .arrow, .arrows or .csv)", ErrUnknown, path, filepath.Ext(path))
}
