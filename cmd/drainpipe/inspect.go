package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/format"
	"github.com/drainpipe/drainpipe/storage"
)

// inspection is what inspect reports of a file (and its --json form).
type inspection struct {
	File   string `json:"file"`
	Format string `json:"format"`
	Rows   int64  `json:"rows"`
	// FooterRows is the row count a Parquet footer states, when it is not
	// the sum of its row groups' (Rows, what a read gives).
	FooterRows *int64        `json:"footer_rows,omitempty"`
	Fields     []fieldInfo   `json:"fields"`
	RowGroups  *groupsInfo   `json:"row_groups,omitempty"` // Parquet
	Batches    int64         `json:"record_batches,omitempty"`
	Groups     []groupDetail `json:"row_group_list,omitempty"`
}

type fieldInfo struct {
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Nullable bool              `json:"nullable"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

type groupsInfo struct {
	Count    int   `json:"count"`
	MinRows  int64 `json:"min_rows"`
	MaxRows  int64 `json:"max_rows"`
	MinBytes int64 `json:"min_bytes"`
	MaxBytes int64 `json:"max_bytes"`
}

type groupDetail struct {
	Rows  int64 `json:"rows"`
	Bytes int64 `json:"bytes"`
}

// listedGroups is how many row groups inspect lists one by one before it
// summarises them (unless --row-groups).
const listedGroups = 10

func inspectCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	allGroups := fs.Bool("row-groups", false, "list every row group, however many")
	metadata := fs.Bool("metadata", false, "show field metadata (such as PARQUET:field_id)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: drainpipe inspect [flags] FILE\n\nPrints a file's schema, row count and row groups (Parquet) or record batches.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageError(err)
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
	ds, err := fileset.Read([]string{path})
	if err != nil {
		return err
	}
	in := inspection{File: path, Format: kind.String()}
	for _, f := range ds.Schema().Fields() {
		fi := fieldInfo{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable}
		if *metadata && f.HasMetadata() {
			fi.Metadata = map[string]string{}
			for i, k := range f.Metadata.Keys() {
				fi.Metadata[k] = f.Metadata.Values()[i]
			}
		}
		in.Fields = append(in.Fields, fi)
	}
	if kind == format.Parquet {
		objects := storage.NewOpener()
		defer objects.Close()
		f, err := objects.Open(context.Background(), path)
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		pf, err := file.NewParquetReader(f)
		if err != nil {
			f.Close()
			return fmt.Errorf("inspect: %s: %w", path, err)
		}
		defer pf.Close()
		md := pf.MetaData()
		g := &groupsInfo{Count: pf.NumRowGroups()}
		for i := range pf.NumRowGroups() {
			rg := md.RowGroup(i)
			d := groupDetail{Rows: rg.NumRows(), Bytes: rg.TotalByteSize()}
			in.Rows += d.Rows
			if i == 0 || d.Rows < g.MinRows {
				g.MinRows = d.Rows
			}
			if i == 0 || d.Bytes < g.MinBytes {
				g.MinBytes = d.Bytes
			}
			g.MaxRows, g.MaxBytes = max(g.MaxRows, d.Rows), max(g.MaxBytes, d.Bytes)
			if *allGroups || pf.NumRowGroups() <= listedGroups {
				in.Groups = append(in.Groups, d)
			}
		}
		in.RowGroups = g
		if md.NumRows != in.Rows {
			in.FooterRows = &md.NumRows
		}
	} else {
		for rec, err := range ds.Records() {
			if err != nil {
				return err
			}
			in.Rows += rec.NumRows()
			in.Batches++
		}
	}
	if *asJSON {
		b, err := json.MarshalIndent(in, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(b))
		return err
	}
	printInspection(stdout, in)
	return nil
}

func printInspection(w io.Writer, in inspection) {
	fmt.Fprintf(w, "file: %s\nformat: %s\nrows: %d", in.File, in.Format, in.Rows)
	if in.FooterRows != nil {
		fmt.Fprintf(w, " (the row groups'; the footer states %d)", *in.FooterRows)
	}
	fmt.Fprint(w, "\nfields:\n")
	for _, f := range in.Fields {
		null := ""
		if f.Nullable {
			null = ", nullable"
		}
		fmt.Fprintf(w, "  %s: %s%s\n", f.Name, f.Type, null)
		for _, k := range slices.Sorted(maps.Keys(f.Metadata)) {
			fmt.Fprintf(w, "    %s: %s\n", k, f.Metadata[k])
		}
	}
	if g := in.RowGroups; g != nil {
		fmt.Fprintf(w, "row groups: %d", g.Count)
		if g.Count > 0 {
			fmt.Fprintf(w, " (%s rows, %s bytes each)", span(g.MinRows, g.MaxRows), span(g.MinBytes, g.MaxBytes))
		}
		fmt.Fprintln(w)
		for i, d := range in.Groups {
			fmt.Fprintf(w, "  row group %d: %d rows, %d bytes\n", i, d.Rows, d.Bytes)
		}
		if len(in.Groups) < g.Count {
			fmt.Fprintf(w, "  (--row-groups lists each)\n")
		}
		return
	}
	fmt.Fprintf(w, "record batches: %d\n", in.Batches)
}

// span prints a range, or one value when the ends meet.
func span(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}
