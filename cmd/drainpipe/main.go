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
		msg := oneLine(err)
		if errors.Is(err, fileset.ErrMemoryCeiling) {
			msg += " (raise it with --max-memory)"
		}
		fmt.Fprintln(os.Stderr, "drainpipe:", msg)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
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
	case "version":
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
	return fmt.Errorf("unknown command %q", args[0])
}

// oneLine folds a multi-line error (Arrow schemas print on many lines)
// into one.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag = cliflag.List
