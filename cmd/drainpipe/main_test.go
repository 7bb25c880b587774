package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/jaegertest"
	"github.com/drainpipe/drainpipe/internal/testing/s3test"
	"github.com/drainpipe/drainpipe/internal/testing/testbin"
	"github.com/drainpipe/drainpipe/sink"
)

// binary is the drainpipe command, built once for the tests that run it
// as a subprocess.
var binary string

func TestMain(m *testing.M) {
	// The servers build (minutes, on a new machine) while drainpipe and
	// the tests before the first that needs them run.
	tests := testbin.Prepare(m, jaegertest.Build, s3test.BuildVersityGW, s3test.BuildGoFakeS3)
	dir, err := os.MkdirTemp("", "drainpipe-cli-test-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "drainpipe")
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-tags", buildTags, "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building drainpipe: %v\n%s", err, out)
		os.Exit(1)
	}
	code := tests.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixture writes rows of UniformTensors(width) to two Parquet files and an
// MLP to model.dpmlp, returning the folder.
func fixture(t *testing.T, rows, width int, sizes ...int) string {
	t.Helper()
	dir := t.TempDir()
	mem := memory.NewGoAllocator()
	all := dataset.UniformTensors(mem, rows, width, 1000, 1)
	half := int64(rows / 2)
	for i, part := range []*dataset.Dataset{dataset.Take(all, half), dataset.Skip(all, half)} {
		w, err := sink.Create(filepath.Join(dir, fmt.Sprintf("in-%d.parquet", i)), all.Schema())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dataset.Copy(w, part.Records()); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := cpu.NewMLP(append([]int{width}, sizes...), cpu.ReLU, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SaveFile(filepath.Join(dir, "model.dpmlp")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func drainpipe(args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

func predictArgs(dir, output string, extra ...string) []string {
	return append([]string{"predict", "--model", filepath.Join(dir, "model.dpmlp"), "--input", filepath.Join(dir, "in-*.parquet"),
		"--output", output, "--keep", "id", "--batch-size", "128", "--part-rows", "2048", "--quiet"}, extra...)
}

// output abstracts a file output and a folder output, local or on object
// storage, for the kill test.
type output struct {
	path        string // as the CLI is given it
	disk, parts string // where its bytes, and an unfinished run's parts, are on disk
	// resume is the flags a run after a kill takes: on object storage, the
	// killed job's lock is left for the next to break.
	resume []string
	input  string // the inputs, if not the fixture's files on disk
	// predict, if set, is the predict command without --output, in place
	// of the fixture's.
	predict []string
}

// args returns the arguments of a predict run of the fixture in dir to o.
func (o output) args(dir string, extra ...string) []string {
	if o.predict != nil {
		return append(append(slices.Clone(o.predict), "--output", o.path), extra...)
	}
	args := predictArgs(dir, o.path, extra...)
	if o.input != "" {
		args[slices.Index(args, "--input")+1] = o.input
	}
	return args
}

func fileOutput(dir, name string) output {
	p := filepath.Join(dir, name)
	return output{path: p, disk: p, parts: p + ".parts", resume: []string{"--resume"}}
}

func folderOutput(dir, name string) output {
	p := filepath.Join(dir, name) + "/"
	return output{path: p, disk: p, parts: p, resume: []string{"--resume"}}
}

func (o output) folder() bool { return o.disk == o.parts }

// complete reports whether the output says it is complete.
func (o output) complete() bool {
	marker := o.disk
	if o.folder() {
		marker = filepath.Join(o.disk, "_SUCCESS")
	}
	_, err := os.Stat(marker)
	return err == nil
}

// unfinished reports whether an unfinished run's parts are there.
func (o output) unfinished() bool {
	if o.folder() {
		_, err := os.Stat(filepath.Join(o.disk, "_manifest.json"))
		return err == nil && !o.complete()
	}
	_, err := os.Stat(o.parts)
	return err == nil
}

// bytes returns the output's content: the file, or the folder's files by
// name.
func (o output) bytes(t *testing.T) []byte {
	t.Helper()
	if !o.folder() {
		b, err := os.ReadFile(o.disk)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	entries, err := os.ReadDir(o.disk)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue // a store's own folders
		}
		b, err := os.ReadFile(filepath.Join(o.disk, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		all = append(append(all, e.Name()...), b...)
	}
	return all
}

// A job killed with SIGKILL at random moments and resumed each time ends
// with the same bytes as a job never interrupted, for a file output and
// for a folder output.
func TestKilledJobResumesExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the CLI many times")
	}
	dir := fixture(t, 60_000, 16, 128, 128, 10)
	for _, outs := range [][2]output{
		{fileOutput(dir, "ref.parquet"), fileOutput(dir, "out.parquet")},
		{folderOutput(dir, "ref"), folderOutput(dir, "out")},
	} {
		ref, out := outs[0], outs[1]
		t.Run(filepath.Base(out.path), func(t *testing.T) { killAndResume(t, dir, ref, out) })
	}
}

func killAndResume(t *testing.T, dir string, ref, out output) {
	if _, stderr, err := drainpipe(ref.args(dir)...); err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}
	want := ref.bytes(t)

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("kill schedule seed %d", seed)
	kills := 0
	for attempt := 0; attempt < 30 && kills < 5; attempt++ {
		cmd := exec.Command(binary, out.args(dir, out.resume...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("run %d failed: %v\n%s", attempt, err, stderr.String())
			}
			attempt = 30 // it finished before the kill
		case <-time.After(time.Duration(20+rng.IntN(600)) * time.Millisecond):
			cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			kills++
		}
		if out.complete() {
			if !bytes.Equal(out.bytes(t), want) {
				t.Fatalf("after %d kills an output says it is complete and is not the complete one", kills)
			}
			if out.unfinished() {
				break // killed between writing the output and removing the parts
			}
			attempt = 30 // the kill came after the job had finished
		}
	}
	// Finish (or, if the output is there, tidy up) with one more resume.
	if out.unfinished() || !out.complete() {
		if _, stderr, err := drainpipe(out.args(dir, out.resume...)...); err != nil {
			t.Fatalf("final resume: %v\n%s", err, stderr)
		}
	}
	if out.unfinished() {
		var left []string
		filepath.WalkDir(out.parts, func(path string, d fs.DirEntry, err error) error {
			left = append(left, path)
			return nil
		})
		t.Fatalf("the parts of an unfinished run are left: %v", left)
	}
	if !bytes.Equal(out.bytes(t), want) {
		t.Fatalf("after %d kills the output differs from the uninterrupted run's", kills)
	}
	if kills == 0 {
		t.Log("no kill landed before the job finished")
	}
	t.Logf("%d kills", kills)
}
