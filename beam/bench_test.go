package dpbeam

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/sink"
)

// BenchmarkPrismVsJob runs the same job (400,000 rows in 4 Parquet files of
// 16,384-row groups, MLP 64-256-256-10, batch 256, keys kept) as the core's
// job into a folder, as `drainpipe predict` runs it (one session a core),
// and as the Beam pipeline on Prism, in interleaved rounds; it reports both
// rates and the pipeline's over the job's (median of the rounds, and the
// lowest and highest).
//
//	cd beam && go test -run '^$' -bench PrismVsJob -benchtime 1x
func BenchmarkPrismVsJob(b *testing.B) {
	dir := b.TempDir()
	const files, rowsPerFile = 4, 100_000
	all := dataset.UniformTensors(memory.DefaultAllocator, files*rowsPerFile, width, 16_384, 9)
	for f := range files {
		w, err := sink.Create(filepath.Join(dir, fmt.Sprintf("in-%d.parquet", f)), all.Schema(), sink.WithRowGroupRows(16_384))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dataset.Copy(w, dataset.Take(dataset.Skip(all, int64(f*rowsPerFile)), rowsPerFile).Records()); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	m, err := cpu.NewMLP([]int{width, 256, 256, 10}, cpu.ReLU, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		b.Fatal(err)
	}
	model := filepath.Join(dir, "model.dpmlp")
	if err := m.SaveFile(model); err != nil {
		b.Fatal(err)
	}
	inputs := []string{filepath.Join(dir, "in-*.parquet")}
	const rows = files * rowsPerFile
	var jobRates, beamRates, ratios, written []float64
	for range b.N {
		for round := range 3 {
			began := time.Now()
			if _, err := job.Run(b.Context(), job.Config{Inputs: inputs, Output: filepath.Join(dir, fmt.Sprintf("job-%d", round)) + string(filepath.Separator),
				Model: m, InputSize: width, Keep: []string{"id"}, BatchSize: 256,
				Predict: []predict.Option{predict.WithGroups(runtime.GOMAXPROCS(0))}}); err != nil {
				b.Fatal(err)
			}
			jobRate := rows / time.Since(began).Seconds()
			began = time.Now()
			wrote := writtenBytes(b)
			p, s := beamPipeline(Config{Inputs: inputs, Model: model, Output: filepath.Join(dir, fmt.Sprintf("beam-%d", round)), Keep: []string{"id"}})
			if _, err := executePrism(b.Context(), p, s); err != nil {
				b.Fatal(err)
			}
			beamRate := rows / time.Since(began).Seconds()
			written = append(written, float64(writtenBytes(b)-wrote))
			jobRates, beamRates, ratios = append(jobRates, jobRate), append(beamRates, beamRate), append(ratios, beamRate/jobRate)
		}
	}
	// What a unit pays for starting its session, against its work.
	began := time.Now()
	const starts = 100
	for range starts {
		sess, err := m.Start(b.Context(), device.SessionConfig{BatchSize: 256, BatchSizes: []int{256}, Replicas: 1, Sessions: 1, Schema: padded(all.Schema())})
		if err != nil {
			b.Fatal(err)
		}
		if err := sess.Shutdown(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Since(began) / starts
	unit := time.Duration(float64(rowsPerFile) / median(beamRates) * float64(time.Second))
	b.ReportMetric(float64(start.Microseconds()), "session_start_µs")
	b.ReportMetric(start.Seconds()/unit.Seconds(), "session_start/unit")

	slices.Sort(ratios)
	b.ReportMetric(median(jobRates), "job_rows/s")
	b.ReportMetric(median(beamRates), "prism_rows/s")
	b.ReportMetric(ratios[len(ratios)/2], "prism/job")
	b.ReportMetric(ratios[0], "prism/job_min")
	b.ReportMetric(ratios[len(ratios)-1], "prism/job_max")
	b.ReportMetric(median(written)/1e6, "prism_written_MB")
}

// writtenBytes returns the bytes this process has passed to write calls
// (Linux's /proc/self/io wchar), or skips the benchmark elsewhere.
func writtenBytes(b *testing.B) int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io: the bytes written are not measured here")
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no wchar in /proc/self/io")
	return 0
}

// padded is a schema with the padding column a session sees.
func padded(s *arrow.Schema) *arrow.Schema {
	return arrow.NewSchema(append(s.Fields(), arrow.Field{Name: device.PaddingColumn, Type: arrow.FixedWidthTypes.Boolean}), nil)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
