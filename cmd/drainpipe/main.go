// Command drainpipe runs batch inference jobs over Parquet, Arrow IPC and
// CSV files, local or on object storage, and serves, evaluates and fits
// models.
//
//	drainpipe predict --model M --input 'data/*.parquet' --output out.parquet [flags]
//	drainpipe eval --model M --input FILES --label COLUMN [--json F] [--plot DIR]
//	drainpipe fit --input FILES --label COLUMN --output M.dpmlp
//	drainpipe serve --model M [--http :8080] [--grpc :8081]
//	drainpipe serve --model-repository DIR [--repository-poll 10s]
//	drainpipe inspect FILE...
//	drainpipe demo
//	drainpipe version
//	drainpipe completion bash|zsh|fish|powershell
//
// Run drainpipe help COMMAND, or a command with --help, for its flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/internal/cliflag"
	"github.com/drainpipe/drainpipe/internal/cloudenv"
	"github.com/spf13/cobra"

	// The object stores the CLI reads and writes (storage imports none).
	_ "github.com/drainpipe/drainpipe/storage/azuredriver"
	_ "github.com/drainpipe/drainpipe/storage/gcsdriver"
	_ "github.com/drainpipe/drainpipe/storage/s3driver"
)

func main() {
	cloudenv.Defaults()
	ignoreFileSizeSignal()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		code := 1
		if errors.Is(err, errUsage) {
			code = 2 // as flag, getopt and cobra programs exit on a usage error
		}
		msg := oneLine(err)
		if errors.Is(err, fileset.ErrMemoryCeiling) {
			msg += " (raise it with --max-memory)"
		}
		fmt.Fprintln(os.Stderr, "drainpipe:", strings.TrimPrefix(msg, "usage: "))
		os.Exit(code)
	}
}

// newRoot returns the command line: the commands, their flags and help
// (cobra), and shell completion (drainpipe completion bash|zsh|fish).
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "drainpipe",
		Short: "Batch and streaming inference over Arrow data",
		Long: `drainpipe runs models over Parquet, Arrow IPC and CSV files, local or on
object storage, in fixed-size padded batches: every row gets one
prediction, in order, exactly once, resumable after a kill. It also
serves models over the Open Inference Protocol, evaluates them with exact
metrics, and fits a softmax regression.`,
		SilenceUsage: true, SilenceErrors: true,
		// No Args: cobra's own check names an unknown command and
		// suggests the nearest ("predcit": predict).
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() }, // no command: the help, exit 0
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(predictCommand(), evalCommand(), fitCommand(), tokenizeCommand(), serveCommand(), inspectCommand(), demoCommand(), versionCommand())
	if text, err := versionText(); err == nil {
		root.Version = "-" // --version and -v print versionText
		root.SetVersionTemplate(text)
	}
	return root
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		err = usageError(fmt.Errorf("%w (drainpipe --help lists the commands)", err))
	}
	return err
}

// errUsage marks a command line that does not parse: the CLI exits 2.
var errUsage = errors.New("usage")

// usageError marks an error of the command line: the CLI exits 2.
func usageError(err error) error {
	return fmt.Errorf("%w: %w", errUsage, err)
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag = cliflag.List
