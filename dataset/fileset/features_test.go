package fileset_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/tensor"
)

// The input recipe checks itself against the files and builds the tensor
// dataset every command reads: the label is never gathered, the width is
// the model's (or what the input gives), and what cannot work is refused
// with the error saying why.
func TestFeatures(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.csv")
	if err := os.WriteFile(path, []byte("id,f0,f1,f2,y\n1,0.5,1,2,1\n2,x,1,2,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		f       fileset.Features
		wantErr error
		schema  string // the dataset's, when it opens; the error's, when set
	}{
		{"gather, label excluded", fileset.Features{Column: "features", Gather: []string{"*"}, Keep: []string{"y"}, Exclude: []string{"y", "id"}},
			nil, "y features"},
		{"model's width", fileset.Features{Column: "features", Gather: []string{"f*"}, Width: 3, Keep: []string{"id"}}, nil, "id features"},
		{"width differs", fileset.Features{Column: "features", Gather: []string{"f*"}, Width: 4}, fileset.ErrFeatures, ""},
		{"matches nothing", fileset.Features{Column: "features", Gather: []string{"g*"}}, fileset.ErrFeatures, ""},
		{"kept and gathered", fileset.Features{Column: "features", Gather: []string{"f*"}, Keep: []string{"f1"}}, fileset.ErrFeatures, ""},
		{"keep missing", fileset.Features{Column: "features", Gather: []string{"f*"}, Keep: []string{"key"}}, fileset.ErrKeep, ""},
		{"no tensor column", fileset.Features{Column: "features"}, fileset.ErrFeatures, ""},
		{"named column missing", fileset.Features{Column: "body", Named: "--text-column"}, fileset.ErrFeatures, `--text-column "body": no such column; the input has id, f0, f1, f2, y`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := arrowtest.Allocator(t)
			set, err := fileset.Open([]string{path}, append(c.f.Options(), fileset.WithAllocator(mem), fileset.WithCSVBadValues(func(string, int64, string, error) {}))...)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := c.f.Dataset(set, mem)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("error %v, want %v", err, c.wantErr)
				}
				if c.schema != "" && err.Error() != c.schema {
					t.Fatalf("error %q, want %q", err, c.schema)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names string
			for i, f := range ds.Schema().Fields() {
				if i > 0 {
					names += " "
				}
				names += f.Name
			}
			if names != c.schema {
				t.Fatalf("columns %q, want %q", names, c.schema)
			}
			feat := ds.Schema().Field(ds.Schema().NumFields() - 1)
			if !arrow.TypeEqual(feat.Type, tensor.Type(3)) {
				t.Fatalf("features of %s, want %s", feat.Type, tensor.Type(3))
			}
		})
	}
}
