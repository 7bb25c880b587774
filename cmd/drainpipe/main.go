// Command drainpipe runs batch inference jobs over Parquet, Arrow IPC and
// CSV files.
//
//	drainpipe predict --model M --input 'data/*.parquet' --output out.parquet [flags]
//	drainpipe serve --model M [--http :8080] [--grpc :8081]
//	drainpipe inspect FILE
//	drainpipe demo
//
// Run a command with --help for its flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/cliflag"
)

const usage = `drainpipe: batch inference over Arrow data

usage:
  drainpipe predict --model M --input FILES --output OUT [flags]   run a model over files
  drainpipe eval --model M --input FILES --label COLUMN            exact metrics, a table, JSON, plots
  drainpipe fit --input FILES --label COLUMN --output M.dpmlp      fit a softmax regression, evaluate held-out rows
  drainpipe serve --model M [--http :8080] [--grpc :8081]          serve models over the Open Inference Protocol (REST, gRPC)
  drainpipe inspect FILE                                           schema, rows, row groups
  drainpipe demo                                                   a full job on synthetic data
  drainpipe version                                                the build: module, Go, Arrow, tags

Run 'drainpipe COMMAND --help' for a command's flags.
`

func main() {
	ignoreFileSizeSignal()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		code := 1
		if errors.Is(err, errUsage) {
			code = 2 // as flag, getopt and cobra programs exit on a usage error
		}
		msg := oneLine(err)
		if errors.Is(err, fileset.ErrMemoryCeiling) {
			msg += " (raise it with --max-memory)"
		}
		fmt.Fprintln(os.Stderr, "drainpipe:", msg)
		os.Exit(code)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch args[0] {
	case "predict":
		return predictCmd(ctx, args[1:], stdout, stderr)
	case "serve":
		return serveCmd(ctx, args[1:], stderr)
	case "inspect":
		return inspectCmd(args[1:], stdout, stderr)
	case "demo":
		return demoCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		return versionCmd(stdout)
	case "eval":
		return evalCmd(ctx, args[1:], stdout, stderr)
	case "fit":
		return fitCmd(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return flag.ErrHelp
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

// errUsage marks a command line that does not parse: the CLI exits 2.
var errUsage = errors.New("usage")

// usageError marks a flag parsing error as a usage error; -h and --help
// stay flag.ErrHelp.
func usageError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}

// oneLine folds a multi-line error (Arrow schemas print on many lines)
// into one.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag = cliflag.List
