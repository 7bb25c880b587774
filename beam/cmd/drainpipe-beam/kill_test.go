package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// The pipeline on Prism, inputs and output on MinIO and on gofakes3,
// killed (kill -9) ten times at random and rerun each time with another
// GOMAXPROCS (Prism runs up to 8 bundles at once whatever it is): the
// reruns skip the committed units, and the last leaves the objects one
// uninterrupted run writes, byte for byte.
func TestKilledPipelineResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline many times against two S3 servers")
	}
	bin := build(t)
	dir := t.TempDir()
	mem := memory.NewGoAllocator()
	all := dataset.UniformTensors(mem, 120_000, 32, 4096, 9)
	third := int64(40_000)
	for i, part := range []*dataset.Dataset{dataset.Take(all, third), dataset.Skip(all, third)} {
		filetest.WriteParquet(t, filepath.Join(dir, fmt.Sprintf("in-%d.parquet", i)), part, sink.WithRowGroupRows(2000))
	}
	m, err := cpu.NewMLP([]int{32, 512, 512, 10}, cpu.ReLU, rand.New(rand.NewPCG(9, 9)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveFile(filepath.Join(dir, "model.dpmlp")); err != nil {
		t.Fatal(err)
	}
	for name, srv := range map[string]*s3test.Server{"minio": s3test.StartMinIO(t), "gofakes3": s3test.StartGoFakeS3(t)} {
		t.Run(name, func(t *testing.T) { killPipeline(t, bin, dir, srv) })
	}
}

func killPipeline(t *testing.T, bin, dir string, srv *s3test.Server) {
	srv.Bucket(t, "beam")
	o := storage.NewOpener()
	defer o.Close()
	for _, name := range []string{"in-0.parquet", "in-1.parquet", "model.dpmlp"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := o.WriteFile(t.Context(), srv.URL("beam", "in/"+name), data, false); err != nil {
			t.Fatal(err)
		}
	}
	command := func(out string, procs int) *exec.Cmd {
		cmd := exec.Command(bin, "--input", srv.URL("beam", "in/*.parquet"), "--model", srv.URL("beam", "in/model.dpmlp"),
			"--output", srv.URL("beam", out), "--keep", "id", "--part-rows", "8192", "--quiet")
		cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", procs))
		return cmd
	}
	began := time.Now()
	if out, err := command("ref/", 1).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	whole := time.Since(began)
	want := filetest.Files(t, srv.URL("beam", "ref/"))

	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 5))
	t.Logf("kill schedule seed %d", seed)
	procs := []int{1, 4, 2, 3}
	kills, finished := 0, false
	for attempt := 0; kills < 10 && attempt < 40 && !finished; attempt++ {
		cmd := command("out/", procs[attempt%len(procs)])
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: %v\n%s", attempt, err, stderr.String())
			}
			finished = true
		case <-time.After(whole * time.Duration(3+rng.IntN(22)) / 100):
			cmd.Process.Signal(syscall.SIGKILL)
			var exit *exec.ExitError
			if err := <-done; errors.As(err, &exit) {
				kills++
			} else {
				finished = true
			}
		}
	}
	if !finished {
		if out, err := command("out/", 2).CombinedOutput(); err != nil {
			t.Fatalf("final run: %v\n%s", err, out)
		}
	}
	got := filetest.Files(t, srv.URL("beam", "out/"))
	filetest.EqualFiles(t, "the resumed folder", got, want)
	var keys []string
	for name := range want {
		keys = append(keys, "out/"+name)
	}
	if left := srv.Uploads(t, "beam", keys...); len(left) > 0 {
		t.Errorf("incomplete uploads left: %v", left)
	}
	if !strings.Contains(string(got["_SUCCESS"]), `"rows": 120000`) {
		t.Errorf("_SUCCESS: %s", got["_SUCCESS"])
	}
	t.Logf("%d kills, %d files; an uninterrupted run took %v", kills, len(got), whole.Round(time.Millisecond))
}
