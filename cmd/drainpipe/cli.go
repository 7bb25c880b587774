package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/atomicfile"
	"github.com/drainpipe/drainpipe/internal/cliflag"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/storage"
)

// noArgs refuses positional arguments; listFlag names the flag a file
// list belongs to, for the hint a shell-expanded glob needs: an unquoted
// --input data-*.parquet arrives as --input data-0.parquet data-1.parquet.
func noArgs(listFlag string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("%s: unexpected argument %q", c.Name(), args[0])
		switch listFlag {
		case "":
		case "--model":
			msg += " (one model a --model: repeat it, --model a=a.dpmlp --model b=b.onnx)"
		default:
			msg += fmt.Sprintf(" (an unquoted glob the shell expanded? quote it, %s 'data-*.parquet', or repeat %s)", listFlag, listFlag)
		}
		return usageError(fmt.Errorf("%s", msg))
	}
}

// atLeastOneArg asks for one argument or more.
func atLeastOneArg(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usageError(fmt.Errorf("%s: no file given", c.Name()))
	}
	return nil
}

// required refuses a run without the flags it needs, as a usage error.
func required(c *cobra.Command, names ...string) error {
	for _, name := range names {
		if !c.Flags().Changed(name) {
			return usageError(fmt.Errorf("%s: --%s is required", c.Name(), name))
		}
	}
	return nil
}

// marshalJSON encodes v indented, with <, > and & as they are (not the
// HTML escapes encoding/json writes by default), and a final newline.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeJSON prints v as JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writeJSONFile writes v as JSON to path atomically: the file appears
// whole, or the old one stays.
func writeJSONFile(path string, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b)
}

// oneLine folds a multi-line error (Arrow schemas print on many lines)
// into one.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// inputFlags are the flags of every command that reads files: which files,
// which columns are the features, and how they are read.
type inputFlags struct {
	inputs, features listFlag
	featureCol       string
	shard            onceFlag
	readRows         int
	csvSample        int
	maxMemory        cliflag.Bytes
	setAside         string
	quiet            bool
}

// add defines the flags on fs; defaultColumn is --feature-column's default.
func (f *inputFlags) add(fs *pflag.FlagSet, defaultColumn string) {
	f.addFiles(fs)
	fs.Var(&f.features, "features", "gather the scalar columns matching these patterns (such as 'f*') into the feature tensor")
	fs.StringVar(&f.featureCol, "feature-column", defaultColumn, "the tensor column of features (when not --features)")
}

// addFiles defines the flags of which files are read and how, for a
// command that reads no feature tensor (tokenize).
func (f *inputFlags) addFiles(fs *pflag.FlagSet) {
	fs.Var(&f.inputs, "input", "input files, globs (** spans folders), folders or URLs (s3://, gs://, azblob://, https://): .parquet, .arrow, .arrows, .csv; repeatable")
	f.shard.value = "0/1"
	fs.Var(&f.shard, "shard", "read shard i of n (i/n): disjoint parts that together cover every row; with predict into a folder, n processes share it")
	fs.IntVar(&f.readRows, "read-rows", 1<<14, "rows per file read (Parquet batch, CSV chunk)")
	fs.IntVar(&f.csvSample, "csv-sample", 10_000, "rows of each CSV input its column types are inferred from")
	fs.Var(&f.maxMemory, "max-memory", "the most memory the reader of one input file may hold, such as 4GiB or 512MiB (default: 2GiB plus 16 times the file's size); a quarter of it, up to 64MiB, bounds an output row group")
	fs.StringVar(&f.setAside, "set-aside", "", "write rows that cannot be used (null or ragged features, a null label, values that do not parse, rows the model fails on) to this file with their keys, source file, file row and reason, and go on (default: the first such row ends the run)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress output")
}

// progress returns a progress display on w, or nil with --quiet.
func (f *inputFlags) progress(w io.Writer, verb string) *progress {
	if f.quiet {
		return nil
	}
	return newProgress(w, verb)
}

// options returns the reading options the flags ask for, and the shard.
func (f *inputFlags) options() ([]fileset.Option, fileset.Shard, error) {
	shard, err := fileset.ParseShard(f.shard.value)
	if err != nil {
		return nil, shard, usageError(fmt.Errorf("--shard: %w", err))
	}
	if f.readRows < 1 {
		return nil, shard, usageError(fmt.Errorf("--read-rows %d: want 1 or more", f.readRows))
	}
	for _, pat := range f.features {
		// --features f* unquoted: the shell hands over the folder's
		// files that match, fitted.dpmlp say, as column patterns.
		if st, err := os.Stat(pat); err == nil && st.Mode().IsRegular() && filepath.Ext(pat) != "" && !strings.ContainsAny(pat, "*?[") {
			return nil, shard, usageError(fmt.Errorf("--features %s is a file of this folder: an unquoted glob the shell expanded? quote it, --features 'f*'", pat))
		}
	}
	return []fileset.Option{fileset.WithShard(shard), fileset.WithReadRows(f.readRows), fileset.WithCSVSample(f.csvSample),
		fileset.WithMaxMemory(int64(f.maxMemory))}, shard, nil
}

// job returns the job's input settings the flags ask for: the files,
// the feature column (or the columns gathered into it), the label if one,
// how the files are read, and the rows set aside.
func (f *inputFlags) job(column, label string) (job.Config, error) {
	_, shard, err := f.options()
	if err != nil {
		return job.Config{}, err
	}
	return job.Config{Inputs: f.inputs, FeatureColumn: column, FeatureNamed: "--feature-column", Gather: f.features, Label: label,
		ReadRows: f.readRows, Shard: shard, CSVSample: f.csvSample, MaxMemory: int64(f.maxMemory), SetAside: f.setAside}, nil
}

// checkWrites is the one policy for the files a command writes besides
// its main output (--set-aside, --stats-json, --json, plots, a fitted
// model): none may be an input, whatever --overwrite says, and one that
// exists is replaced only when replace is set (--overwrite; for predict
// also --resume, whose earlier run wrote them). Each output is a flag
// and its path; an empty path is not written.
func (f *inputFlags) checkWrites(replace bool, outputs ...[2]string) error {
	inputs, _ := fileset.Expand(f.inputs) // what does not expand fails the job, later, naming it
	for _, out := range outputs {
		flag, path := out[0], out[1]
		if path == "" {
			continue
		}
		for _, in := range inputs {
			if storage.SameFile(in, path) {
				return fmt.Errorf("%s %s is an input: it would be replaced", flag, path)
			}
		}
		if _, err := os.Stat(path); err == nil && !replace {
			return fmt.Errorf("%s %s exists: --overwrite replaces it", flag, path)
		}
	}
	return nil
}

// onceFlag is a string flag that may be given once: a second value is an
// error, not a silent replacement of the first.
type onceFlag struct {
	value string
	set   bool
}

func (o *onceFlag) String() string { return o.value }
func (o *onceFlag) Type() string   { return "string" }

func (o *onceFlag) Set(v string) error {
	if o.set {
		return fmt.Errorf("given twice (%s, then %s)", o.value, v)
	}
	o.value, o.set = v, true
	return nil
}
