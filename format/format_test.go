package format_test

import (
	"errors"
	"testing"

	"github.com/drainpipe/drainpipe/format"
)

func TestOf(t *testing.T) {
	for path, want := range map[string]format.Format{
		"a.parquet": format.Parquet, "b.PQ": format.Parquet, "c.arrow": format.IPCFile, "d.feather": format.IPCFile,
		"e.ipc": format.IPCFile, "f.arrows": format.IPCStream, "g.csv": format.CSV,
	} {
		if got, err := format.Of(path); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", path, got, err, want)
		}
	}
	if _, err := format.Of("h.txt"); !errors.Is(err, format.ErrUnknown) {
		t.Errorf("h.txt: %v", err)
	}
	if s := format.IPCStream.String(); s != "arrow-stream" {
		t.Errorf("String: %q", s)
	}
}
