//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/drainpipe/drainpipe/internal/testing/arrowtest"
)

// drainpipeLimited runs the CLI with a file size limit (RLIMIT_FSIZE, in
// KiB): a write past it fails with EFBIG, as a full disk fails with ENOSPC.
func drainpipeLimited(kib int, args ...string) (stderr string, err error) {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	var e bytes.Buffer
	cmd := exec.Command("sh", "-c", fmt.Sprintf("ulimit -f %d && exec %s %s", kib, binary, strings.Join(quoted, " ")))
	cmd.Stderr = &e
	err = cmd.Run()
	return e.String(), err
}

// A write that fails (a file size limit while writing a part, or while
// merging the output) is a one-line error naming the file; what was
// committed stays, and a resume with room to write gives the bytes of a
// run never interrupted.
func TestWriteFaultThenResume(t *testing.T) {
	dir := fixture(t, 20_000, 16, 32, 10)
	ref := filepath.Join(dir, "ref.parquet")
	if _, stderr, err := drainpipe(predictArgs(dir, ref)...); err != nil {
		t.Fatalf("reference: %v\n%s", err, stderr)
	}
	want := arrowtest.ReadFile(t, ref)
	for _, c := range []struct {
		name string
		kib  int // parts of 2048 rows are about 110 KiB; the output about 1 MiB
	}{{"part", 64}, {"merge", 512}} {
		out := filepath.Join(dir, c.name+".parquet")
		stderr, err := drainpipeLimited(c.kib, predictArgs(dir, out)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if err == nil || len(lines) != 1 || !strings.HasPrefix(lines[0], "drainpipe: ") ||
			!strings.Contains(stderr, "file too large") || !strings.Contains(stderr, dir) {
			t.Fatalf("%s: %v, stderr %q", c.name, err, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: an output exists after the fault", c.name)
		}
		// Every part is as large as the first: a limit that stops one stops
		// the first, and a run with nothing committed leaves nothing. The
		// merge comes after every part is committed.
		_, err = os.Stat(filepath.Join(out+".parts", "manifest.json"))
		if committed := c.name == "merge"; committed != (err == nil) {
			t.Fatalf("%s: parts committed: %v, want %v", c.name, err == nil, committed)
		}
		if _, stderr, err := drainpipe(predictArgs(dir, out, "--resume")...); err != nil {
			t.Fatalf("%s: resume: %v\n%s", c.name, err, stderr)
		}
		if got := arrowtest.ReadFile(t, out); !bytes.Equal(got, want) {
			t.Fatalf("%s: the resumed output differs from the uninterrupted run's", c.name)
		}
	}
}

// A job on an output another job holds is refused with that job's pid
// and changes nothing; an output that is an input is refused; a read over
// its memory ceiling is a clear error.
func TestRefusals(t *testing.T) {
	dir := fixture(t, 1000, 8, 4)
	out := filepath.Join(dir, "out.parquet")
	lockPath := filepath.Join(dir, ".out.parquet.lock")
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--resume"}, {"--overwrite"}} {
		_, stderr, err := drainpipe(predictArgs(dir, out, extra...)...)
		if err == nil || !strings.Contains(stderr, fmt.Sprintf("in use by a running job (pid %d)", os.Getpid())) {
			t.Fatalf("%v: %v %q", extra, err, stderr)
		}
	}
	f.Close()                                             // the lock goes with the descriptor
	if entries, _ := os.ReadDir(dir); len(entries) != 4 { // two inputs, the model, the lock file
		t.Fatalf("a refused job left %v", entries)
	}
	for _, c := range []struct {
		args []string
		say  string
	}{
		{predictArgs(dir, filepath.Join(dir, "in-0.parquet"), "--overwrite"), "would replace an input"},
		{predictArgs(dir, dir+"/", "--overwrite"), "would replace an input"},
		{predictArgs(dir, out, "--max-memory", "4KiB"), "memory ceiling of 4096 bytes"},
		{predictArgs(dir, out, "--max-memory", "lots"), "want a positive number of bytes"},
	} {
		_, stderr, err := drainpipe(c.args...)
		if err == nil || !strings.Contains(stderr, c.say) {
			t.Fatalf("%v: %v %q", c.args[len(c.args)-2:], err, stderr)
		}
	}
}
