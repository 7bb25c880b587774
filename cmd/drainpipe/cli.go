package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drainpipe/drainpipe/internal/atomicfile"
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
		if listFlag != "" {
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
