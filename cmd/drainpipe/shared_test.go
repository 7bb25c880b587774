package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/sink"
	"github.com/drainpipe/drainpipe/storage"
)

// sharedInputs writes rows ids [0, rows) of width 16 to two Parquet
// files in row groups of about group rows, and a model; it returns the
// folder.
func sharedInputs(t *testing.T, rows int, group int64) string {
	t.Helper()
	dir := t.TempDir()
	mem := memory.NewGoAllocator()
	all := dataset.UniformTensors(mem, rows, 16, 1000, 1)
	third := int64(rows / 3)
	for i, part := range []*dataset.Dataset{dataset.Take(all, third), dataset.Skip(all, third)} {
		filetest.WriteParquet(t, filepath.Join(dir, fmt.Sprintf("in-%d.parquet", i)), part, sink.WithRowGroupBytes(group*(16*4+8)))
	}
	m, err := cpu.NewMLP([]int{16, 256, 256, 10}, cpu.ReLU, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveFile(filepath.Join(dir, "model.dpmlp")); err != nil {
		t.Fatal(err)
	}
	return dir
}

var committedLine = regexp.MustCompile(`(?m)^committed (part-\S+): rows=(\d+)`)

// n processes of predict --shard i/n share one folder on VersityGW and on
// gofakes3: killed (kill -9) at random and started again with other n,
// two of them given the same i at once, they leave the objects one
// uninterrupted process writes, byte for byte, with no upload left
// incomplete; no unit is committed twice (VersityGW honours If-None-Match;
// on gofakes3 a unit two processes race for may be written twice, with
// the same bytes).
func TestShardedProcessesShareOneFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the CLI many times against two S3 servers")
	}
	const rows = 60_000
	dir := sharedInputs(t, rows, 1000)
	for name, srv := range map[string]*s3test.Server{"versitygw": s3test.Start(t), "gofakes3": s3test.StartGoFakeS3(t)} {
		t.Run(name, func(t *testing.T) { shareOneFolder(t, dir, srv, rows, name == "versitygw") })
	}
}

func shareOneFolder(t *testing.T, dir string, srv *s3test.Server, rows int64, conditional bool) {
	srv.Bucket(t, "shared")
	o := storage.NewOpener()
	for _, name := range []string{"in-0.parquet", "in-1.parquet"} {
		data := arrowtest.ReadFile(t, filepath.Join(dir, name))
		if err := o.WriteFile(t.Context(), srv.URL("shared", "in/"+name), data, false); err != nil {
			t.Fatal(err)
		}
	}
	o.Close()
	args := func(out string, shard string) []string {
		return []string{"predict", "--model", filepath.Join(dir, "model.dpmlp"), "--input", srv.URL("shared", "in/*.parquet"),
			"--output", srv.URL("shared", out), "--keep", "id", "--batch-size", "256", "--part-rows", "4096", "--shard", shard, "--quiet"}
	}
	stdout, stderr, err := drainpipe(args("ref/", "0/1")...)
	if err != nil || !strings.Contains(stdout, " complete") {
		t.Fatalf("reference run: %v\n%s%s", err, stdout, stderr)
	}
	want := filetest.Files(t, srv.URL("shared", "ref/"))

	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 3))
	t.Logf("kill schedule seed %d", seed)
	commits := map[string]int{}
	kills, rounds := 0, 0
	for _, n := range []int{2, 5, 1, 3, 2, 5, 3, 1, 2, 3, 5, 2} {
		rounds++
		last := rounds == 12
		type proc struct {
			cmd    *exec.Cmd
			stdout bytes.Buffer
			stderr bytes.Buffer
			done   chan error
		}
		var procs []*proc
		for i := range n + 1 {
			p := &proc{done: make(chan error, 1)}
			p.cmd = exec.Command(binary, args("out/", fmt.Sprintf("%d/%d", i%n, n))...) // shard 0 twice at once
			p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { p.done <- p.cmd.Wait() }()
			procs = append(procs, p)
		}
		deadline := time.After(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		if last {
			deadline = nil
		}
		for _, p := range procs {
			var err error
			select {
			case err = <-p.done:
			case <-deadline:
				deadline = closed
				p.cmd.Process.Signal(syscall.SIGKILL)
				err = <-p.done
			}
			var exit *exec.ExitError
			switch {
			case errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
				kills++
			case err != nil:
				t.Fatalf("round %d: %v\n%s%s", rounds, err, p.stdout.String(), p.stderr.String())
			}
		}
		for _, p := range procs {
			for _, m := range committedLine.FindAllStringSubmatch(p.stdout.String(), -1) {
				commits[m[1]]++
			}
		}
		if _, err := storage.NewOpener().Stat(t.Context(), srv.URL("shared", "out/_SUCCESS")); err == nil {
			break
		}
	}
	got := filetest.Files(t, srv.URL("shared", "out/"))
	if _, ok := got["_SUCCESS"]; !ok {
		t.Fatalf("after %d rounds and %d kills the folder is not complete", rounds, kills)
	}
	filetest.EqualFiles(t, "the shared folder", got, want)
	units := 0
	for name := range want {
		if strings.HasPrefix(name, "part-") {
			units++
			// A process killed between its commit and its line says none.
			if c := commits[name]; c > 1 && (conditional || c > 2) {
				t.Errorf("%s committed %d times", name, c)
			}
		}
	}
	var keys []string
	for name := range want {
		keys = append(keys, "out/"+name)
	}
	if left := srv.Uploads(t, "shared", keys...); len(left) > 0 {
		t.Errorf("incomplete uploads left: %v", left)
	}
	t.Logf("%d units, %d rounds, %d kills, %d rows", units, rounds, kills, rows)

	// An input replaced since: the rerun is refused, naming it, and the
	// folder is left as it was.
	o = storage.NewOpener()
	defer o.Close()
	data := arrowtest.ReadFile(t, filepath.Join(dir, "in-0.parquet"))
	if err := o.WriteFile(t.Context(), srv.URL("shared", "in/in-1.parquet"), data, true); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = drainpipe(args("out/", "1/2")...)
	if err == nil || !strings.Contains(stderr, "in-1.parquet?") || !strings.Contains(stderr, "was replaced: _job.json names version") {
		t.Fatalf("a rerun over a replaced input: %v\n%s", err, stderr)
	}
	filetest.EqualFiles(t, "the folder after a refused rerun", filetest.Files(t, srv.URL("shared", "out/")), want)
}

// closed is a channel that is always ready.
var closed = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()
