package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/format"
)

func inspectCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: drainpipe inspect FILE\n\nPrints a file's schema, row count and row groups (Parquet) or record batches.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("inspect: want one file, got %d arguments", fs.NArg())
	}
	path := fs.Arg(0)
	kind, err := format.Of(path)
	if err != nil {
		return err
	}
	ds, err := dataset.Files([]string{path})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "file: %s\nformat: %s\n%s\n", path, kind, ds.Schema())
	if kind == format.Parquet {
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			return fmt.Errorf("inspect: %s: %w", path, err)
		}
		defer pf.Close()
		md := pf.MetaData()
		fmt.Fprintf(stdout, "rows: %d\nrow groups: %d\n", md.NumRows, pf.NumRowGroups())
		for g := range pf.NumRowGroups() {
			rg := md.RowGroup(g)
			fmt.Fprintf(stdout, "  row group %d: %d rows, %d bytes\n", g, rg.NumRows(), rg.TotalByteSize())
		}
		return nil
	}
	var rows, records int64
	for rec, err := range ds.Records() {
		if err != nil {
			return err
		}
		rows += rec.NumRows()
		records++
	}
	fmt.Fprintf(stdout, "rows: %d\nrecord batches: %d\n", rows, records)
	return nil
}
