// Package filetest holds test helpers that read files through fileset, kept
// apart from arrowtest so that the packages fileset builds on can still use
// arrowtest in their own tests.
package filetest

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
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
