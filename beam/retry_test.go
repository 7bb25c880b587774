package dpbeam

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/drainpipe/drainpipe/job"
)

// A unit's work done twice — one attempt after the other, two at once,
// and through the pipeline with every unit planned twice — commits one
// file a unit: the second attempt finds the first's and discards its
// own, and every row is written once.
func TestRetriedUnitCommitsOnce(t *testing.T) {
	dir := inputs(t)
	out := filepath.Join(t.TempDir(), "out") + "/"
	cfg := Config{Inputs: []string{filepath.Join(dir, "*.parquet")}, Model: filepath.Join(dir, "model.dpmlp"),
		Output: out, Keep: []string{"id"}, BatchSize: 256, PartRows: 8192}
	plan := &planFn{Cfg: cfg}
	if err := plan.Setup(); err != nil {
		t.Fatal(err)
	}
	defer plan.Teardown()
	var units []job.Unit
	if err := plan.ProcessElement(t.Context(), nil, func(u job.Unit) { units = append(units, u) }); err != nil {
		t.Fatal(err)
	}
	fn := &predictFn{Cfg: cfg}
	if err := fn.Setup(); err != nil {
		t.Fatal(err)
	}
	defer fn.Teardown()
	attempt := func(u job.Unit) (Result, error) {
		var r Result
		err := fn.ProcessElement(context.Background(), u, func(got Result) { r = got })
		return r, err
	}
	// One after the other.
	first, err := attempt(units[0])
	if err != nil || first.Taken || first.Rows != units[0].Rows {
		t.Fatalf("first attempt: %+v %v", first, err)
	}
	second, err := attempt(units[0])
	if err != nil || !second.Taken {
		t.Fatalf("second attempt: %+v %v", second, err)
	}
	// Two at once, for each other unit.
	var wg sync.WaitGroup
	results := make([][2]Result, len(units))
	for i, u := range units[1:] {
		for k := range 2 {
			wg.Go(func() {
				r, err := attempt(u)
				if err != nil {
					t.Error(err)
				}
				results[i+1][k] = r
			})
		}
	}
	wg.Wait()
	for i, rs := range results[1:] {
		if rs[0].Taken == rs[1].Taken {
			t.Errorf("unit %s: two attempts at once, taken %v and %v", units[i+1].Name(), rs[0].Taken, rs[1].Taken)
		}
	}
	if got := readPredictions(t, filepath.Join(out, "part-*.parquet")); len(got) != totalRows {
		t.Fatalf("%d rows after attempts twice, want %d", len(got), totalRows)
	}

	// Through the pipeline, into a fresh folder.
	testTwice.Store(true)
	defer testTwice.Store(false)
	cfg.Output = filepath.Join(t.TempDir(), "twice") + "/"
	if err := run(t, cfg); err != nil {
		t.Fatal(err)
	}
	if got := readPredictions(t, filepath.Join(cfg.Output, "part-*.parquet")); len(got) != totalRows {
		t.Fatalf("%d rows from a pipeline that ran every unit twice, want %d", len(got), totalRows)
	}
	files, _ := filepath.Glob(filepath.Join(cfg.Output, "part-*.parquet"))
	if len(files) != len(units) {
		t.Fatalf("%d unit files, want %d", len(files), len(units))
	}
	if _, err := os.Stat(filepath.Join(cfg.Output, SuccessName)); err != nil {
		t.Fatal(err)
	}
}
