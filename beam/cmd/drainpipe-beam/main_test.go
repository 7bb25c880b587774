package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
	"github.com/drainpipe/drainpipe/job"
)

// A runner's error ends with what the failing step said; that is the line
// printed, not the plan around it.
func TestCause(t *testing.T) {
	err := errors.New("job job-001 failed:\nbundle inst001 failed: while executing Process for Plan[stage-001]:\n1: DataSource[...]\n\tcaused by:\nDoFn[...] failed:\nno input files: \"x-*.parquet\" matches nothing\n")
	if got := cause(err); got != `no input files: "x-*.parquet" matches nothing` {
		t.Fatalf("cause: %q", got)
	}
}

// On the local runner an input that matches nothing is refused before the
// pipeline starts.
func TestPreflight(t *testing.T) {
	err := preflight([]string{filepath.Join(t.TempDir(), "none-*.parquet")})
	if err == nil || !strings.Contains(err.Error(), "none-*.parquet") {
		t.Fatalf("preflight of nothing: %v", err)
	}
}

// The built command on Prism: the shared flags --set-aside and --quiet do
// what they do in the core CLI: a NaN row goes to the set-aside folder and
// the rest is predicted; --quiet leaves the INFO lines out.
func TestCommandSetsAsideQuietly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command (-short)")
	}
	dir := t.TempDir()
	bin := build(t)
	in := filepath.Join(dir, "in.csv")
	var b strings.Builder
	b.WriteString("id,f0,f1\n")
	for i := range 100 {
		v := fmt.Sprint(i % 5)
		if i == 37 {
			v = "NaN"
		}
		fmt.Fprintf(&b, "%d,%s,1\n", i, v)
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := cpu.NewMLP([]int{2, 4, 3}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "m.dpmlp")
	if err := m.SaveFile(model); err != nil {
		t.Fatal(err)
	}
	run := func(out string, extra ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--input", in, "--model", model, "--output", filepath.Join(dir, out),
			"--features", "f*", "--keep", "id", "--set-aside", filepath.Join(dir, out+"-aside")}, extra...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		return stderr.String(), err
	}
	loud, err := run("loud")
	if err != nil || !strings.Contains(loud, "level=INFO") {
		t.Fatalf("without --quiet: %v, INFO lines %v\n%s", err, strings.Contains(loud, "level=INFO"), loud)
	}
	quiet, err := run("quiet", "--quiet")
	if err != nil || strings.Contains(quiet, "level=INFO") {
		t.Fatalf("--quiet: %v\n%s", err, quiet)
	}
	var man job.UnitManifest
	data, err := os.ReadFile(filepath.Join(dir, "quiet", "_manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &man); err != nil {
		t.Fatal(err)
	}
	if man.Rows != 99 || man.RowsSetAside != 1 {
		t.Fatalf("manifest: %d rows, %d set aside; want 99 and 1", man.Rows, man.RowsSetAside)
	}
	ids := filetest.Column(t, filepath.Join(dir, "quiet-aside", "*.parquet"), "id")
	if len(ids) != 1 || ids[0] != "37" {
		t.Fatalf("set aside ids %v, want [37]", ids)
	}
}

// build builds the command for the test.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "drainpipe-beam")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}
