// Command jobmem measures drainpipe batch jobs from Parquet to Parquet: the
// peak resident memory of the job process at two input sizes (streaming
// means the larger one should need about the same), and the rows per second
// of the MLP 64-256-256-10 job.
//
//	go run ./bench/jobmem                      # 1M and 10M rows
//	go run ./bench/jobmem --rows 10000,100000  # a quick run
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/sink"
)

const (
	width       = 64
	rowsPerFile = 1_000_000
)

func main() {
	rowsFlag := flag.String("rows", "1000000,10000000", "comma-separated input sizes; the first is the baseline")
	mlpRows := flag.Int("mlp-rows", 1_000_000, "rows for the MLP throughput job (0 skips it)")
	dirFlag := flag.String("dir", "", "work folder (default: a temporary one, removed at the end)")
	flag.Parse()

	dir := *dirFlag
	if dir == "" {
		d, err := os.MkdirTemp("", "drainpipe-jobmem-")
		check(err)
		defer os.RemoveAll(d)
		dir = d
	}
	bin := filepath.Join(dir, "drainpipe")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/drainpipe").CombinedOutput()
	if err != nil {
		log.Fatalf("build: %v\n%s", err, out)
	}
	small := saveModel(dir, "softmax.dpmlp", []int{width, 10})
	mlp := saveModel(dir, "mlp.dpmlp", []int{width, 256, 256, 10})

	var sizes []int
	for _, s := range strings.Split(*rowsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		check(err)
		sizes = append(sizes, n)
	}
	fmt.Printf("%-10s %-8s %12s %10s %12s\n", "rows", "model", "peak RSS MB", "seconds", "rows/s")
	var base float64
	for i, n := range sizes {
		input := writeInput(dir, n)
		rss, secs := runJob(bin, small, input, filepath.Join(dir, "out.parquet"))
		fmt.Printf("%-10d %-8s %12.1f %10.2f %12.0f\n", n, "softmax", rss, secs, float64(n)/secs)
		if i == 0 {
			base = rss
		} else {
			fmt.Printf("  peak RSS ratio %d/%d rows: %.2f×\n", n, sizes[0], rss/base)
		}
		if *mlpRows > 0 && n == *mlpRows {
			rss, secs := runJob(bin, mlp, input, filepath.Join(dir, "out.parquet"))
			fmt.Printf("%-10d %-8s %12.1f %10.2f %12.0f\n", n, "mlp", rss, secs, float64(n)/secs)
		}
		os.RemoveAll(filepath.Dir(input))
	}
}

func saveModel(dir, name string, sizes []int) string {
	m, err := cpu.NewMLP(sizes, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	check(err)
	path := filepath.Join(dir, name)
	check(m.SaveFile(path))
	return path
}

// writeInput writes n rows (an id and 64 float32 features) to Parquet
// files of a million rows each and returns their glob.
func writeInput(dir string, n int) string {
	in := filepath.Join(dir, fmt.Sprintf("in-%d", n))
	check(os.MkdirAll(in, 0o755))
	mem := memory.NewGoAllocator()
	for f := 0; f*rowsPerFile < n; f++ {
		rows := min(rowsPerFile, n-f*rowsPerFile)
		w, err := sink.Create(filepath.Join(in, fmt.Sprintf("part-%03d.parquet", f)), dataset.TensorSchema(width))
		check(err)
		_, err = dataset.Copy(w, dataset.UniformTensors(mem, rows, width, 8192, uint64(f)).Records())
		check(err)
		check(w.Commit())
	}
	return filepath.Join(in, "*.parquet")
}

// runJob runs one predict job and returns its peak RSS in MB and seconds.
func runJob(bin, model, input, output string) (float64, float64) {
	os.Remove(output)
	cmd := exec.Command(bin, "predict", "--model", model, "--input", input, "--output", output,
		"--keep", "id", "--batch-size", "256", "--quiet", "--overwrite")
	cmd.Stderr = os.Stderr
	start := time.Now()
	check(cmd.Run())
	secs := time.Since(start).Seconds()
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return float64(ru.Maxrss) / 1024, secs
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
