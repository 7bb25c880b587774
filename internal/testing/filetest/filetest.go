// Package filetest holds test helpers that read files through fileset, kept
// apart from arrowtest so that the packages fileset builds on can still use
// arrowtest in their own tests.
package filetest

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// ReadWhole reads a file (a local path or a URL) whole into one record the
// caller releases. Comparing whole tables, not records, keeps a test
// independent of how a reader divides a file: a local file's row groups
// are decoded side by side, an object's in turn.
func ReadWhole(t testing.TB, mem memory.Allocator, path string) arrow.RecordBatch {
	t.Helper()
	ds, err := fileset.Read([]string{path}, fileset.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	whole, err := dataset.Concat(mem, ds.Schema(), recs)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return whole
}

// Column returns every value of column name in the files pattern matches
// (a path, glob or folder), as text (Arrow's ValueStr), in order.
func Column(t testing.TB, pattern, name string) []string {
	t.Helper()
	ds, err := fileset.Read([]string{pattern})
	if err != nil {
		t.Fatal(err)
	}
	idx := ds.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("%s: no column %q in %s", pattern, name, ds.Schema())
	}
	var out []string
	for rec, err := range ds.Records() {
		if err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		col := rec.Column(idx[0])
		for i := range col.Len() {
			out = append(out, col.ValueStr(i))
		}
	}
	return out
}

// WriteParquet writes ds to a new file at path (sink's options, such as
// its row groups' size), whole.
func WriteParquet(t testing.TB, path string, ds *dataset.Dataset, opts ...sink.Option) {
	t.Helper()
	w, err := sink.Create(path, ds.Schema(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, ds.Records()); err != nil {
		w.Abort()
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// Files returns the files of a folder (a path or URL) by name, with their
// bytes, read through storage.
func Files(t testing.TB, folder string) map[string][]byte {
	t.Helper()
	o := storage.NewOpener()
	defer o.Close()
	entries, err := o.List(t.Context(), folder)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if files[e.Name], err = o.ReadFile(t.Context(), storage.Join(folder, e.Name)); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// EqualFiles fails the test unless got and want hold the same names with
// the same bytes.
func EqualFiles(t testing.TB, what string, got, want map[string][]byte) {
	t.Helper()
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s: %s differs (%d bytes, want %d)", what, name, len(got[name]), len(b))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s should not be there", what, name)
		}
	}
}
