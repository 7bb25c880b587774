package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/fakedev"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/sink"
)

// resumeKills is how many processes the resume goal stops mid-work.
const resumeKills = 6

// resumeGoals are a shared folder's costs of stopping: the rows predicted
// by processes of any number, stopped at random, and the rerun that
// finishes, against the input's rows (a stop loses at most the unit it
// was writing); and the state a resume reads, per 10 million rows.
func resumeGoals(c *config) []goal {
	rows := max(c.rows, 100_000)
	const unitRows = 2048
	in := filepath.Join(c.dir, "resume-in.parquet")
	made := false
	ensure := func() {
		if !made {
			writeGrouped(in, dataset.UniformTensors(c.mem, rows, width, 4096, 3), 512)
			made = true
		}
	}
	// Row groups of 512 rows fill units of 2048 exactly.
	bound := 1 + float64(resumeKills*unitRows)/float64(rows)
	gs := []goal{{fmt.Sprintf("resume: rows predicted across %d stopped processes and the rerun ÷ rows (%d rows, units of %d; target 1 + stops × unit ÷ rows)", resumeKills, rows, unitRows),
		atMost(bound), func(r int) float64 {
			ensure()
			return c.resumeCost(in, rows, unitRows, uint64(r))
		}}}
	gs = append(gs, goal{"resume: state a resume reads (job record, manifest, unit footers), MB per 10 million rows, default units", atMost(1.0), func(int) float64 {
		return c.resumeState()
	}})
	return gs
}

// writeGrouped writes ds to path in row groups of group rows.
func writeGrouped(path string, ds *dataset.Dataset, group int64) {
	w, err := sink.Create(path, ds.Schema(), sink.WithRowGroupRows(group))
	check(err)
	_, err = dataset.Copy(w, ds.Records())
	check(err)
	check(w.Commit())
}

// resumeCost runs the job over a shared folder in rounds of 1 to 4
// processes, the first of each stopped at a random row of its work and
// the others run to their end, until resumeKills are stopped (or nothing
// is left), then once to the end, and returns the rows predicted ÷ the
// rows.
func (c *config) resumeCost(in string, rows, unitRows int, seed uint64) float64 {
	var predicted atomic.Int64
	out := filepath.Join(c.dir, fmt.Sprintf("resume-%d", seed)) + "/"
	defer os.RemoveAll(out)
	cfg := job.Config{Inputs: []string{in}, Output: out, Model: fakedev.RowCounter{Model: c.model("mlp"), Rows: &predicted}, ModelID: "mlp", InputSize: width,
		Keep: []string{"id"}, BatchSize: c.batch, PartRows: unitRows, Allocator: c.mem}
	rng := rand.New(rand.NewPCG(seed, 11))
	for round, stops := 0, 0; stops < resumeKills && round < 4*resumeKills; round++ {
		n := 1 + round%4
		var wg sync.WaitGroup
		var stopped atomic.Bool
		for i := range n {
			ctx, cancel := context.WithCancel(context.Background())
			p := cfg
			p.Shard = fileset.Shard{Index: i, Count: n}
			if i == 0 {
				stopAt := int64(1 + rng.IntN(rows/n))
				p.Progress = func(done, _ int64) {
					if done >= stopAt {
						cancel()
					}
				}
			}
			wg.Go(func() {
				defer cancel()
				_, err := job.RunUnits(ctx, p)
				if errors.Is(err, context.Canceled) {
					stopped.Store(true)
				} else {
					check(err)
				}
			})
		}
		wg.Wait()
		if stopped.Load() {
			stops++
		}
	}
	if sum, err := job.RunUnits(context.Background(), cfg); err != nil || !sum.Units.Sealed {
		check(fmt.Errorf("resume: the last run: %v", err))
	}
	return float64(predicted.Load()) / float64(rows)
}

// resumeState writes a shared folder at the default unit size (a narrow
// input and model, so the rows are cheap) and returns what a resume
// reads of it beyond the listing — the job record, the manifest and each
// unit file's footer — in MB per 10 million rows.
func (c *config) resumeState() float64 {
	const rows = 3*(1<<18) + 1000
	in := filepath.Join(c.dir, "state-in.parquet")
	writeGrouped(in, dataset.UniformTensors(c.mem, rows, 4, 1<<14, 5), 1<<16)
	defer os.Remove(in)
	out := filepath.Join(c.dir, "state") + "/"
	defer os.RemoveAll(out)
	m, err := cpu.NewMLP([]int{4, 10}, cpu.ReLU, rand.New(rand.NewPCG(1, 2)))
	check(err)
	sum, err := job.RunUnits(context.Background(), job.Config{Inputs: []string{in}, Output: out, Model: m, ModelID: "state", InputSize: 4,
		Keep: []string{"id"}, BatchSize: c.batch, Allocator: c.mem})
	check(err)
	if !sum.Units.Sealed {
		check(errors.New("resume: the state job did not seal its folder"))
	}
	entries, err := os.ReadDir(out)
	check(err)
	var bytes int64
	for _, e := range entries {
		path := filepath.Join(out, e.Name())
		switch {
		case e.Name() == job.JobName || e.Name() == "_manifest.json":
			st, err := os.Stat(path)
			check(err)
			bytes += st.Size()
		case strings.HasPrefix(e.Name(), "part-"):
			bytes += footerBytes(path)
		}
	}
	return float64(bytes) / 1e6 * 10e6 / rows
}

// footerBytes returns the bytes of a Parquet file's footer: its
// metadata, its length and the closing magic.
func footerBytes(path string) int64 {
	f, err := os.Open(path)
	check(err)
	defer f.Close()
	st, err := f.Stat()
	check(err)
	tail := make([]byte, 8)
	_, err = f.ReadAt(tail, st.Size()-8)
	check(err)
	return int64(binary.LittleEndian.Uint32(tail[:4])) + 8
}
