package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/internal/testing/filetest"
	"github.com/drainpipe/drainpipe/sink"
)

func TestBadInputOneLineErrors(t *testing.T) {
	dir := fixture(t, 300, 8, 4)
	model := filepath.Join(dir, "model.dpmlp")
	notDir := filepath.Join(dir, "plainfile")
	for name, data := range map[string]string{
		"corrupt.dpmlp": "DPMLP\x00\x00\x01 damaged",
		"trunc.parquet": "PAR1xxxx",
		"bad.csv":       "id,f0,f1,f2,f3,f4,f5,f6,f7\n1,1,2,3,4,5,6,7,8\n2,1,2\n",
		"nulls.csv":     "id,f0,f1,f2,f3,f4,f5,f6,f7\n1,1,2,3,4,5,6,7,8\n2,1,2,3,,5,6,7,8\n",
		"nan.csv":       "id,f0,f1,f2,f3,f4,f5,f6,f7\n1,1,2,3,4,5,6,7,8\n2,1,2,3,4,NaN,6,7,8\n",
		"late.csv":      "id,f0,f1,f2,f3,f4,f5,f6,f7\n1,1,2,3,4,5,6,7,8\n2,1,2,3,4,5,6,7,8\n3,1,2,x,4,5,6,7,8\n",
		"plainfile":     "",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wide, _ := cpu.NewMLP([]int{9, 2}, cpu.ReLU, rand.New(rand.NewPCG(1, 1)))
	wide.SaveFile(filepath.Join(dir, "wide.dpmlp"))
	in := filepath.Join(dir, "in-*.parquet")
	out := filepath.Join(dir, "out.parquet")
	cases := []struct {
		name string
		args []string
		say  string
	}{
		{"missing file", []string{"--model", model, "--input", filepath.Join(dir, "none.parquet"), "--output", out}, "no such file"},
		{"empty glob", []string{"--model", model, "--input", filepath.Join(dir, "*.none"), "--output", out}, "matches nothing"},
		{"truncated parquet", []string{"--model", model, "--input", filepath.Join(dir, "trunc.parquet"), "--output", out}, "trunc.parquet"},
		{"csv column count", []string{"--model", model, "--input", filepath.Join(dir, "bad.csv"), "--output", out, "--features", "f*"}, "bad.csv"},
		{"feature nulls", []string{"--model", model, "--input", filepath.Join(dir, "nulls.csv"), "--output", out, "--features", "f*"}, `column "f3": row 1 is null`},
		{"feature nan", []string{"--model", model, "--input", filepath.Join(dir, "nan.csv"), "--output", out, "--features", "f*"}, `nan.csv, line 3, column "f4": cpu: feature value is not finite: value 4 is NaN`},
		{"csv value", []string{"--model", model, "--input", filepath.Join(dir, "late.csv"), "--output", out, "--features", "f*", "--csv-sample", "2"}, `late.csv: CSV value does not parse: line 4, column "f2": "x" is not an int64`},
		{"feature count", []string{"--model", filepath.Join(dir, "wide.dpmlp"), "--input", filepath.Join(dir, "nulls.csv"), "--output", out, "--features", "f*"}, "match 8 columns, the model takes 9"},
		{"feature column missing", []string{"--model", model, "--input", in, "--output", out, "--feature-column", "pixels"}, `--feature-column "pixels": no such column; the input has id, features`},
		{"feature wrong type", []string{"--model", model, "--input", in, "--output", out, "--feature-column", "id"}, "id"},
		{"keep missing", []string{"--model", model, "--input", in, "--output", out, "--keep", "key"}, `missing column: "key" is not in the input`},
		{"model missing", []string{"--model", filepath.Join(dir, "none.dpmlp"), "--input", in, "--output", out}, "no such file"},
		{"model corrupt", []string{"--model", filepath.Join(dir, "corrupt.dpmlp"), "--input", in, "--output", out}, "bad model file"},
		{"model width", []string{"--model", filepath.Join(dir, "wide.dpmlp"), "--input", in, "--output", out}, "8 values per row, want 9"},
		{"shard malformed", []string{"--model", model, "--input", in, "--output", out, "--shard", "1-2"}, "bad shard"},
		{"shard index", []string{"--model", model, "--input", in, "--output", out, "--shard", "2/2"}, "bad shard"},
		{"output not writable", []string{"--model", model, "--input", in, "--output", filepath.Join(notDir, "o.parquet")}, "not a directory"},
		{"no model flag", []string{"--input", in, "--output", out}, "--model is required"},
	}
	for _, c := range cases {
		_, stderr, err := drainpipe(append([]string{"predict"}, c.args...)...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("%s: exit %v, want non-zero", c.name, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "drainpipe: ") || !strings.Contains(last, c.say) {
			t.Errorf("%s: stderr %q, want a one-line error saying %q", c.name, stderr, c.say)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: an output was written", c.name)
		}
		if _, err := os.Stat(out + ".parts"); err == nil {
			t.Fatalf("%s: parts were left", c.name)
		}
	}
}

func TestPredictInspectOverwriteAndStats(t *testing.T) {
	dir := fixture(t, 1000, 8, 4)
	out := filepath.Join(dir, "out.parquet")
	stats := filepath.Join(dir, "stats.json")
	stdout, stderr, err := drainpipe(predictArgs(dir, out, "--stats-json", stats, "--shard", "0/1")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "rows=1000 batches=8 padded=24") {
		t.Fatalf("summary %q", stdout)
	}
	if b, err := os.ReadFile(stats); err != nil || !strings.Contains(string(b), `"rows": 1000`) {
		t.Fatalf("stats %s, %v", b, err)
	}
	if _, stderr, err = drainpipe(predictArgs(dir, out)...); err == nil || !strings.Contains(stderr, "output exists") {
		t.Fatalf("second run without --overwrite: %v %q", err, stderr)
	}
	if _, stderr, err = drainpipe(predictArgs(dir, out, "--overwrite")...); err != nil {
		t.Fatalf("--overwrite: %v %s", err, stderr)
	}
	stdout, _, err = drainpipe("inspect", out)
	if err != nil || !strings.Contains(stdout, "rows: 1000") || !strings.Contains(stdout, "probabilities") || !strings.Contains(stdout, "row group 0") {
		t.Fatalf("inspect: %v\n%s", err, stdout)
	}
	for _, cmd := range [][]string{{"predict", "--help"}, {"inspect", "--help"}, {"demo", "--help"}, {"--help"}} {
		stdout, stderr, err := drainpipe(cmd...)
		if err != nil || !strings.Contains(stdout+stderr, "Usage:") {
			t.Errorf("%v: %v %q", cmd, err, stdout+stderr)
		}
	}
	// Sharded runs together cover every row once.
	var rows int
	for i := range 3 {
		o := filepath.Join(dir, fmt.Sprintf("shard-%d.parquet", i))
		stdout, stderr, err := drainpipe(predictArgs(dir, o, "--shard", fmt.Sprintf("%d/3", i))...)
		if err != nil {
			t.Fatalf("shard %d: %v %s", i, err, stderr)
		}
		var n int
		fmt.Sscanf(stdout[strings.Index(stdout, "rows=")+5:], "%d", &n)
		rows += n
	}
	if rows != 1000 {
		t.Fatalf("shards wrote %d rows, want 1000", rows)
	}
	// One file of one row group: shard 0 gets every row, and shard 1 says
	// why it gets none.
	one := filepath.Join(dir, "in-0.parquet")
	for i, want := range []string{"rows=500", "rows=0"} {
		o := filepath.Join(dir, fmt.Sprintf("one-%d.parquet", i))
		stdout, stderr, err := drainpipe("predict", "--model", filepath.Join(dir, "model.dpmlp"), "--input", one, "--output", o, "--shard", fmt.Sprintf("%d/2", i))
		if err != nil || !strings.Contains(stdout, want) {
			t.Fatalf("shard %d/2 of one row group: %v, %q, want %s", i, err, stdout, want)
		}
		if warned := strings.Contains(stderr, "this shard holds no rows"); warned != (i == 1) {
			t.Errorf("shard %d/2 of one row group: warning %v: %s", i, warned, stderr)
		}
	}
}

// The demo keeps its folder, reuses it on the next run, and ends with
// commands to paste next: each of them works.
func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	stdout, stderr, err := drainpipe("demo", "--rows", "5000", "--dir", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "rows=5000 batches=20 padded=120") || !strings.Contains(stdout, "first predictions") {
		t.Fatalf("demo output:\n%s", stdout)
	}
	stdout, stderr, err = drainpipe("demo", "--rows", "5000", "--dir", dir)
	if err != nil || !strings.Contains(stdout, "(reused)") || !strings.Contains(stdout, "complete already (rows=5000)") {
		t.Fatalf("second demo: %v\n%s\n%s", err, stdout, stderr)
	}
	_, next, ok := strings.Cut(stdout, "next:\n")
	if !ok {
		t.Fatalf("no next commands:\n%s", stdout)
	}
	commands := strings.Split(strings.TrimSpace(next), "\n")
	if len(commands) != 5 {
		t.Fatalf("next commands:\n%s", next)
	}
	for _, line := range commands {
		args := strings.Fields(strings.TrimSpace(line))
		if args[0] != "drainpipe" {
			t.Fatalf("not a drainpipe command: %q", line)
		}
		for i, a := range args {
			args[i] = strings.Trim(a, "'") // as a shell would pass it
		}
		if out, stderr, err := drainpipe(args[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s%s", line, err, out, stderr)
		}
	}
}

// --feature-column names the column a .dpmlp model reads too.
func TestFeatureColumnForMLP(t *testing.T) {
	dir := fixture(t, 10, 8, 4)
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte("id,f0,f1,f2,f3,f4,f5,f6,f7\n1,1,2,3,4,5,6,7,8\n2,1,2,3,4,5,6,7,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := drainpipe("predict", "--model", filepath.Join(dir, "model.dpmlp"), "--input", in,
		"--output", filepath.Join(dir, "out.parquet"), "--features", "f*", "--feature-column", "pixels", "--quiet")
	if err != nil || !strings.Contains(stdout, "rows=2 ") {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
}

// --set-aside: rows that cannot be predicted (a value that does not parse,
// a NaN feature) go to their own file and the job goes on.
func TestSetAsideCLI(t *testing.T) {
	dir := fixture(t, 10, 8, 4)
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte("id,f0,f1,f2,f3,f4,f5,f6,f7\n1,1,2,3,4,5,6,7,8\n2,1,2,3,4,NaN,6,7,8\n3,1,2,x,4,5,6,7,8\n4,1,2,3,4,5,6,7,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.parquet")
	aside := filepath.Join(dir, "aside.parquet")
	stdout, stderr, err := drainpipe("predict", "--model", filepath.Join(dir, "model.dpmlp"), "--input", in, "--output", out,
		"--features", "f*", "--keep", "id", "--set-aside", aside, "--csv-sample", "1", "--quiet")
	if err != nil || !strings.Contains(stdout, "rows=2 ") || !strings.Contains(stdout, "set_aside=2") {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	stdout, _, err = drainpipe("inspect", aside)
	if err != nil || !strings.Contains(stdout, "rows: 2") || !strings.Contains(stdout, "reason") {
		t.Fatalf("inspect %s: %v\n%s", aside, err, stdout)
	}
	// Each row names its source column: the NaN's f4, not the gathered
	// tensor; the value that does not parse, f2.
	if cols := filetest.Column(t, aside, "column"); strings.Join(cols, ",") != "f4,f2" {
		t.Fatalf("the set-aside rows' columns: %v, want f4, f2", cols)
	}
}

// A value that does not parse inside the CSV type sample does not make a
// feature column text: its row is set aside (or named in the error), and
// the other rows are predicted, at the default sample size.
func TestCSVFeatureValueInSample(t *testing.T) {
	dir := fixture(t, 10, 8, 4)
	in := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(in, []byte("id,f0,f1,f2,f3,f4,f5,f6,f7\n1,1,2,3,4,5,6,7,8\n2,1,2,3,4,5,6,7,8\n3,1,2,x,4,5,6,7,8\n4,1,2,3,4,5,6,7,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "model.dpmlp")
	out, aside := filepath.Join(dir, "out.parquet"), filepath.Join(dir, "aside.parquet")
	stdout, stderr, err := drainpipe("predict", "--model", model, "--input", in, "--output", out,
		"--features", "f*", "--keep", "id", "--set-aside", aside, "--quiet")
	if err != nil || !strings.Contains(stdout, "rows=3 ") || !strings.Contains(stdout, "set_aside=1") {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	_, stderr, err = drainpipe("predict", "--model", model, "--input", in, "--output", filepath.Join(dir, "out2.parquet"),
		"--features", "f*", "--keep", "id", "--quiet")
	if err == nil || !strings.Contains(stderr, in) || !strings.Contains(stderr, `"f2"`) || strings.Contains(stderr, "utf8") {
		t.Fatalf("without --set-aside: %v\n%s", err, stderr)
	}
}

// The newcomer's rough edges: version; inspect without metadata noise, a
// summary of many row groups, JSON; a finished job resumed says so; flags
// named as typed; --keep of a --features column.
func TestCLIEdges(t *testing.T) {
	stdout, _, err := drainpipe("version")
	if err != nil || !strings.Contains(stdout, "drainpipe ") || !strings.Contains(stdout, "go: go1.") || !strings.Contains(stdout, "arrow: github.com/apache/arrow-go/v18") {
		t.Fatalf("version: %v\n%s", err, stdout)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && !strings.Contains(stdout, "revision: "+strings.TrimSpace(string(head))) {
		t.Fatalf("version, built in a git checkout, names no revision:\n%s", stdout)
	}
	if again, _, err := drainpipe("--version"); err != nil || again != stdout {
		t.Fatalf("--version: %v\n%s", err, again)
	}
	// A command line that does not parse exits 2, as flag programs do (a
	// bare drainpipe prints its help: TestRootCommand).
	for _, args := range [][]string{{"nosuch"}, {"predict", "--nosuchflag"}} {
		_, _, err := drainpipe(args...)
		if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("%v: %v, want exit status 2", args, err)
		}
	}

	dir := fixture(t, 3000, 8, 4)
	folder := filepath.Join(dir, "folder") + "/"
	if _, stderr, err := drainpipe(predictArgs(dir, folder)...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	stdout, _, err = drainpipe(predictArgs(dir, folder, "--resume")...)
	if err != nil || !strings.Contains(stdout, "is complete already (rows=3000)") {
		t.Fatalf("resuming a finished job: %v\n%s", err, stdout)
	}
	out := filepath.Join(dir, "out.parquet")
	if _, stderr, err := drainpipe(predictArgs(dir, out)...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	stdout, _, err = drainpipe(predictArgs(dir, out, "--resume")...)
	if err != nil || !strings.Contains(stdout, "is complete already (rows=3000)") {
		t.Fatalf("resuming a finished job with a file output: %v\n%s", err, stdout)
	}
	_, stderr, err := drainpipe(predictArgs(dir, out)...)
	if err == nil || !strings.Contains(stderr, "output exists") || !strings.Contains(stderr, "--overwrite replaces it") {
		t.Fatalf("existing output: %v %q", err, stderr)
	}

	many := filepath.Join(dir, "many.parquet")
	w, err := sink.Create(many, dataset.TensorSchema(8), sink.WithRowGroupRows(100))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Copy(w, dataset.UniformTensors(memory.NewGoAllocator(), 3000, 8, 1000, 1).Records()); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = drainpipe("inspect", many)
	if err != nil || !strings.Contains(stdout, "row groups: 30 (100 rows") || strings.Contains(stdout, "row group 29") ||
		strings.Contains(stdout, "PARQUET:") || !strings.Contains(stdout, "features: fixed_size_list") {
		t.Fatalf("inspect:\n%s", stdout)
	}
	stdout, _, _ = drainpipe("inspect", "--row-groups", many)
	if !strings.Contains(stdout, "row group 29: 100 rows") {
		t.Fatalf("inspect --row-groups:\n%s", stdout)
	}
	stdout, _, err = drainpipe("inspect", "--json", many)
	var doc struct {
		Rows      int64 `json:"rows"`
		RowGroups struct {
			Count int `json:"count"`
		} `json:"row_groups"`
		Fields []struct{ Name string } `json:"fields"`
	}
	if err != nil || json.Unmarshal([]byte(stdout), &doc) != nil || doc.Rows != 3000 || doc.RowGroups.Count != 30 || len(doc.Fields) != 2 {
		t.Fatalf("inspect --json: %v\n%s", err, stdout)
	}

	csv := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(csv, []byte("id,f0,f1,f2,f3,f4,f5,f6,f7\n1,1,2,3,4,5,6,7,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = drainpipe("predict", "--model", filepath.Join(dir, "model.dpmlp"), "--input", csv, "--output", filepath.Join(dir, "c.parquet"),
		"--features", "f*", "--keep", "f0")
	if err == nil || !strings.Contains(stderr, `--keep f0 matches --features "f*"`) {
		t.Fatalf("--keep of a feature: %v %q", err, stderr)
	}
}

// The command line behaves as the ones people know (cobra's): help for a
// command names its flags by type and shows examples; flags may follow
// the arguments; an unquoted glob the shell expanded gets a hint; shell
// completion is generated; -v is --version; missing flags are usage
// errors.
func TestCLIConventions(t *testing.T) {
	stdout, _, err := drainpipe("help", "predict")
	if err != nil || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "--input list") || !strings.Contains(stdout, "--max-memory bytes") {
		t.Fatalf("help predict: %v\n%s", err, stdout)
	}
	if v, _, err := drainpipe("-v"); err != nil || !strings.HasPrefix(v, "drainpipe ") {
		t.Fatalf("-v: %v %q", err, v)
	}
	if script, _, err := drainpipe("completion", "bash"); err != nil || !strings.Contains(script, "__start_drainpipe") {
		t.Fatalf("completion bash: %v", err)
	}
	dir := fixture(t, 100, 8, 4)
	usage := func(args []string, want string) {
		t.Helper()
		_, stderr, err := drainpipe(args...)
		if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, want) {
			t.Fatalf("%v: %v %q, want exit 2 saying %q", args, err, stderr, want)
		}
	}
	// What a shell makes of an unquoted --input dir/in-*.parquet.
	usage([]string{"predict", "--model", filepath.Join(dir, "model.dpmlp"), "--output", filepath.Join(dir, "o.parquet"),
		"--input", filepath.Join(dir, "in-0.parquet"), filepath.Join(dir, "in-1.parquet")}, "an unquoted glob the shell expanded? quote it")
	usage([]string{"predict", "--input", filepath.Join(dir, "in-0.parquet")}, "--model is required")
	usage([]string{"inspect"}, "no file given")
	usage([]string{"predict", "--shard", "0/2", "--shard", "1/2"}, "given twice (0/2, then 1/2)")
	usage([]string{"predict", "--model", "m", "--input", "i", "--output", "o.parquet", "--part-rows", "0"}, "--part-rows 0")

	// Flags after the arguments; a glob; the first rows; a model file.
	stdout, _, err = drainpipe("inspect", filepath.Join(dir, "in-*.parquet"), "--json")
	var files []inspection
	if err != nil || json.Unmarshal([]byte(stdout), &files) != nil || len(files) != 2 || files[0].Rows+files[1].Rows != 100 {
		t.Fatalf("inspect GLOB --json: %v\n%s", err, stdout)
	}
	stdout, _, err = drainpipe("inspect", filepath.Join(dir, "in-0.parquet"), "--head", "3")
	if err != nil || !strings.Contains(stdout, "first 3 rows:") {
		t.Fatalf("inspect --head: %v\n%s", err, stdout)
	}
	if lines := strings.Split(strings.TrimSpace(stdout[strings.Index(stdout, "first 3 rows:"):]), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[1], "id") {
		t.Fatalf("inspect --head 3 prints %d lines:\n%s", len(lines), stdout)
	}
	stdout, _, err = drainpipe("inspect", filepath.Join(dir, "model.dpmlp"))
	if err != nil || !strings.Contains(stdout, "kind: drainpipe MLP") || !strings.Contains(stdout, "fixed_size_list<item: float32, nullable>[8]") || !strings.Contains(stdout, "probabilities") {
		t.Fatalf("inspect a model: %v\n%s", err, stdout)
	}
}

// One overwrite policy for every file a command writes: --set-aside,
// --stats-json (predict), --json (eval) and a fitted model never replace
// an input, --overwrite or not, and replace another existing file only
// with --overwrite; the input is left as it was.
func TestNoCommandWritesOverAnInput(t *testing.T) {
	dir := fixture(t, 300, 8, 4)
	input := filepath.Join(dir, "in-0.parquet")
	before, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(dir, "train.csv")
	if err := os.WriteFile(csv, []byte("f0,f1,label\n1,2,0\n2,1,1\n3,3,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.parquet")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"predict --set-aside", predictArgs(dir, out, "--set-aside", input)},
		{"predict --set-aside --overwrite", predictArgs(dir, out, "--set-aside", input, "--overwrite")},
		{"predict --stats-json", predictArgs(dir, out, "--stats-json", input)},
		{"predict --stats-json --resume", predictArgs(dir, out, "--stats-json", input, "--resume")},
		{"eval --json", []string{"eval", "--model", filepath.Join(dir, "model.dpmlp"), "--input", filepath.Join(dir, "in-*.parquet"), "--label", "id", "--json", input, "--overwrite"}},
		{"fit --set-aside", []string{"fit", "--input", csv, "--label", "label", "--features", "f*", "--output", filepath.Join(dir, "fit.dpmlp"), "--set-aside", csv, "--overwrite"}},
	} {
		_, stderr, err := drainpipe(c.args...)
		if err == nil || !strings.Contains(stderr, "is an input") {
			t.Errorf("%s onto an input: %v %q, want it refused", c.name, err, stderr)
		}
		if after, _ := os.ReadFile(input); !bytes.Equal(after, before) {
			t.Fatalf("%s replaced the input", c.name)
		}
	}
	other := filepath.Join(dir, "stats.json")
	if err := os.WriteFile(other, []byte("not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := drainpipe(predictArgs(dir, out, "--stats-json", other)...); err == nil || !strings.Contains(stderr, "--stats-json "+other+" exists: --overwrite replaces it") {
		t.Fatalf("--stats-json onto an existing file: %v %q", err, stderr)
	}
	if _, stderr, err := drainpipe(predictArgs(dir, out, "--stats-json", other, "--overwrite")...); err != nil {
		t.Fatalf("--stats-json --overwrite: %v %s", err, stderr)
	}
}

// A bare drainpipe prints its help and exits 0, as cobra tools do; a
// misspelt command is an unknown command with the nearest suggested, one
// line, exit 2.
func TestRootCommand(t *testing.T) {
	stdout, _, err := drainpipe()
	if err != nil || !strings.Contains(stdout, "Available Commands:") {
		t.Fatalf("bare drainpipe: %v\n%s", err, stdout)
	}
	_, stderr, err := drainpipe("predcit")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("a misspelt command: %v", err)
	}
	line := strings.TrimSpace(stderr)
	if !strings.Contains(line, `unknown command "predcit"`) || !strings.Contains(line, "predict") || strings.Contains(line, "drainpipe: drainpipe:") || strings.Contains(line, "\n") {
		t.Fatalf("a misspelt command: %q", stderr)
	}
}

// An unquoted --features f* the shell expanded into a file name of the
// folder is named as such, not looked for as a column.
func TestFeaturesExpandedByTheShell(t *testing.T) {
	dir := fixture(t, 10, 8, 4)
	// The tests run in this package's folder, which holds main.go.
	_, stderr, err := drainpipe("predict", "--model", filepath.Join(dir, "model.dpmlp"), "--input", filepath.Join(dir, "in-*.parquet"),
		"--output", filepath.Join(dir, "o.parquet"), "--features", "main.go", "--quiet")
	if err == nil || !strings.Contains(stderr, "--features main.go is a file of this folder: an unquoted glob the shell expanded?") {
		t.Fatalf("--features main.go: %v %q", err, stderr)
	}
}
