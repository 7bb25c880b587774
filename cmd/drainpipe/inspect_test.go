package main

import (
	le "encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/sink"
)

// A Parquet footer whose row count is not the sum of its row groups' (as
// in parquet-testing's repeated_no_annotation.parquet) shows both: the
// rows a read gives, and what the footer states.
func TestInspectFooterRowsDisagree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.parquet")
	w, err := sink.Create(path, dataset.TensorSchema(4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.UniformTensors(memory.NewGoAllocator(), 6, 4, 6, 1).Records()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	setFooterRows(t, path, 0)
	stdout, stderr, err := drainpipe("inspect", path)
	if err != nil || !strings.Contains(stdout, "rows: 6 (the row groups'; the footer states 0)") {
		t.Fatalf("inspect: %v\n%s%s", err, stdout, stderr)
	}
	stdout, _, err = drainpipe("inspect", "--json", path)
	var doc struct {
		Rows       int64  `json:"rows"`
		FooterRows *int64 `json:"footer_rows"`
	}
	if err != nil || json.Unmarshal([]byte(stdout), &doc) != nil || doc.Rows != 6 || doc.FooterRows == nil || *doc.FooterRows != 0 {
		t.Fatalf("inspect --json: %v\n%s", err, stdout)
	}
}

// setFooterRows rewrites the num_rows of a Parquet file's footer.
func setFooterRows(t *testing.T, path string, rows int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(le.LittleEndian.Uint32(data[len(data)-8:]))
	footer := data[len(data)-8-n : len(data)-8]
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), footer, &md); err != nil {
		t.Fatal(err)
	}
	md.NumRows = rows
	out, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	patched := append(append([]byte(nil), data[:len(data)-8-n]...), out...)
	patched = le.LittleEndian.AppendUint32(patched, uint32(len(out)))
	patched = append(patched, "PAR1"...)
	if err := os.WriteFile(path, patched, 0o644); err != nil {
		t.Fatal(err)
	}
}
