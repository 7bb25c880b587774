package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/spf13/cobra"

	"github.com/drainpipe/drainpipe/dataset"
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
	// Head holds the first rows, with --head.
	Head []map[string]any `json:"head,omitempty"`
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

const inspectLong = `Prints what files hold: their format, schema, row count, and row groups
(Parquet) or record batches; with --head, their first rows. FILE may be a
glob, a folder or a URL, as --input takes them. A model file (.dpmlp,
.onnx) is described by its input and outputs.`

const inspectExample = `  drainpipe inspect data.parquet
  drainpipe inspect 'data/*.parquet' --json
  drainpipe inspect bad-rows.parquet --head 20       # the set-aside rows, with their reasons
  drainpipe inspect model.dpmlp`

func inspectCommand() *cobra.Command {
	c := &cobra.Command{Use: "inspect FILE...", Short: "A file's schema, rows, row groups; a model's inputs and outputs", Long: inspectLong, Example: inspectExample, Args: atLeastOneArg}
	fs := c.Flags()
	asJSON := fs.Bool("json", false, "print JSON (an object, or an array for several files)")
	allGroups := fs.Bool("row-groups", false, "list every row group, however many")
	metadata := fs.Bool("metadata", false, "show field metadata (such as PARQUET:field_id)")
	head := fs.Int("head", 0, "print the first N rows of each file")
	c.RunE = func(c *cobra.Command, args []string) error {
		stdout := c.OutOrStdout()
		var out []any
		for _, arg := range args {
			if isModelFile(arg) {
				m, err := describeModel(arg)
				if err != nil {
					return err
				}
				out = append(out, m)
				continue
			}
			paths, err := fileset.Expand([]string{arg})
			if err != nil {
				return err
			}
			if len(paths) == 0 {
				return fmt.Errorf("inspect: %s matches no file", arg)
			}
			for _, path := range paths {
				in, err := inspectFile(path, *allGroups, *metadata, *head)
				if err != nil {
					return err
				}
				out = append(out, in)
			}
		}
		if *asJSON {
			var doc any = out
			if len(out) == 1 {
				doc = out[0]
			}
			return writeJSON(stdout, doc)
		}
		for i, item := range out {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			switch v := item.(type) {
			case inspection:
				printInspection(stdout, v)
				printHead(stdout, v)
			case modelInfo:
				printModel(stdout, v)
			}
		}
		return nil
	}
	return c
}

// inspectFile describes one data file, with its first head rows.
func inspectFile(path string, allGroups, metadata bool, head int) (inspection, error) {
	kind, err := format.Of(path)
	if err != nil {
		return inspection{}, err
	}
	ds, err := fileset.Read([]string{path})
	if err != nil {
		return inspection{}, err
	}
	in := inspection{File: path, Format: kind.String()}
	for _, f := range ds.Schema().Fields() {
		fi := fieldInfo{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable}
		if metadata && f.HasMetadata() {
			fi.Metadata = map[string]string{}
			for i, k := range f.Metadata.Keys() {
				fi.Metadata[k] = f.Metadata.Values()[i]
			}
		}
		in.Fields = append(in.Fields, fi)
	}
	if head > 0 {
		if in.Head, err = headRows(ds, head); err != nil {
			return inspection{}, err
		}
	}
	if kind != format.Parquet {
		for rec, err := range ds.Records() {
			if err != nil {
				return inspection{}, err
			}
			in.Rows += rec.NumRows()
			in.Batches++
		}
		return in, nil
	}
	objects := storage.NewOpener()
	defer objects.Close()
	f, err := objects.Open(context.Background(), path)
	if err != nil {
		return inspection{}, fmt.Errorf("inspect: %w", err)
	}
	pf, err := file.NewParquetReader(f)
	if err != nil {
		f.Close()
		return inspection{}, fmt.Errorf("inspect: %s: %w", path, err)
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
		if allGroups || pf.NumRowGroups() <= listedGroups {
			in.Groups = append(in.Groups, d)
		}
	}
	in.RowGroups = g
	if md.NumRows != in.Rows {
		in.FooterRows = &md.NumRows
	}
	return in, nil
}

// headRows returns the first n rows of ds, each a column-to-value map
// (values as Arrow prints them).
func headRows(ds *dataset.Dataset, n int) ([]map[string]any, error) {
	var rows []map[string]any
	for rec, err := range ds.Records() {
		if err != nil {
			return nil, err
		}
		for r := 0; r < int(rec.NumRows()) && len(rows) < n; r++ {
			row := make(map[string]any, rec.NumCols())
			for c, col := range rec.Columns() {
				row[rec.ColumnName(c)] = col.GetOneForMarshal(r)
			}
			rows = append(rows, row)
		}
		if len(rows) >= n {
			break
		}
	}
	return rows, nil
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

// printHead prints the first rows as a table, the columns in schema order.
func printHead(w io.Writer, in inspection) {
	if len(in.Head) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var names []string
	for _, f := range in.Fields {
		names = append(names, f.Name)
	}
	fmt.Fprintf(w, "first %d rows:\n", len(in.Head))
	fmt.Fprintln(tw, strings.Join(names, "\t"))
	for _, row := range in.Head {
		cells := make([]string, len(names))
		for i, name := range names {
			cells[i] = cell(row[name])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// cell prints a value for the table: long lists shortened.
func cell(v any) string {
	if v == nil {
		return "null"
	}
	s := fmt.Sprint(v)
	if b, err := json.Marshal(v); err == nil && (strings.HasPrefix(string(b), "[") || strings.HasPrefix(string(b), "{")) {
		s = string(b)
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// span prints a range, or one value when the ends meet.
func span(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}
