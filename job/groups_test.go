package job_test

import (
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/job"
)

// A job's Parquet output holds its row groups within a quarter of
// MaxMemory: 20,000 rows of predictions (about 0.7 MB) at MaxMemory 1 MiB
// come in groups of at most 256 KiB, where the sink's default would make
// one group.
func TestRowGroupsWithinMaxMemory(t *testing.T) {
	mem := arrowtest.Allocator(t)
	input, m := setup(t, mem, 20_000)
	for _, c := range []struct {
		maxMemory int64
		atLeast   int
	}{{0, 1}, {1 << 20, 3}} {
		cfg := config(mem, input, filepath.Join(t.TempDir(), "out.parquet"), m)
		cfg.MaxMemory = c.maxMemory
		if _, err := job.WriteFile(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
		f, err := file.OpenParquetFile(cfg.Output, false)
		if err != nil {
			t.Fatal(err)
		}
		groups := f.NumRowGroups()
		t.Logf("MaxMemory %d: %d row groups", c.maxMemory, groups)
		f.Close()
		if groups < c.atLeast || (c.maxMemory == 0 && groups != 1) {
			t.Fatalf("MaxMemory %d: %d row groups, want %d or more (one by default)", c.maxMemory, groups, c.atLeast)
		}
	}
}
