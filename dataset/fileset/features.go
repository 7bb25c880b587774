package fileset

import (
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/tensor"
)

var (
	// ErrFeatures reports feature columns that are missing or unusable.
	ErrFeatures = errors.New("bad feature columns")
	// ErrKeep reports a column to keep that the input does not have.
	ErrKeep = errors.New("missing column")
)

// Features is the input recipe of a model: which columns of the files
// become the feature tensor it reads, and which are read along. The CLI's
// predict, eval and fit and the Beam transform all read their inputs
// through it.
type Features struct {
	// Column names the tensor column the model reads. With Gather set it
	// is made by gathering the scalar columns whose names match the
	// patterns (path.Match syntax, such as "f*"), in schema order.
	Column string
	Gather []string
	// Named is how the user named Column or Gather, such as a command's
	// flag ("--text-column"): an error about them starts with it. Empty,
	// the errors name the recipe's fields.
	Named string
	// Width is the values a row the model takes. 0 takes what the input
	// gives: the columns Gather matches, or a fixed_size_list's width (a
	// model being fitted).
	Width int
	// Keep names columns read along, written next to predictions (keys)
	// or scored against them (a label). Exclude names columns never
	// gathered, whatever the patterns match (a label).
	Keep    []string
	Exclude []string
}

// namedError is an ErrFeatures that speaks of what the user named, in
// the user's words alone.
type namedError struct{ msg string }

func (e *namedError) Error() string        { return e.msg }
func (e *namedError) Is(target error) bool { return target == ErrFeatures }

// Options returns the read options the recipe asks of the files: gathered
// CSV columns are numbers, whatever a sample of rows suggests.
func (f Features) Options() []Option {
	if len(f.Gather) == 0 {
		return nil
	}
	return []Option{WithCSVNumbers(f.Gather...)}
}

// Columns checks the recipe against the files' schema and returns the
// columns to read (Keep first) and, with Gather, the columns gathered.
func (f Features) Columns(set *Set) (read, gathered []string, err error) {
	schema := set.Schema()
	if len(f.Gather) > 0 {
		if gathered, err = dataset.MatchColumns(schema, f.Gather...); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrFeatures, err)
		}
		gathered = slices.DeleteFunc(gathered, func(name string) bool { return slices.Contains(f.Exclude, name) })
		switch {
		case len(gathered) == 0:
			return nil, nil, fmt.Errorf("%w: %q match no column of %s", ErrFeatures, f.Gather, dataset.FieldNames(schema))
		case f.Width > 0 && len(gathered) != f.Width:
			return nil, nil, fmt.Errorf("%w: %q match %d columns, the model takes %d features", ErrFeatures, f.Gather, len(gathered), f.Width)
		}
	} else if len(schema.FieldIndices(f.Column)) == 0 {
		if f.Named != "" {
			return nil, nil, &namedError{fmt.Sprintf("%s %q: no such column; the input has %s", f.Named, f.Column, dataset.FieldNames(schema))}
		}
		return nil, nil, fmt.Errorf("%w: no column %q in the input (it has %s)", ErrFeatures, f.Column, dataset.FieldNames(schema))
	}
	for _, k := range f.Keep {
		if slices.Contains(gathered, k) {
			return nil, nil, fmt.Errorf("%w: column %q is both gathered into the tensor and kept: it can be one or the other", ErrFeatures, k)
		}
		if len(schema.FieldIndices(k)) == 0 {
			return nil, nil, fmt.Errorf("%w: %q is not in the input (it has %s)", ErrKeep, k, dataset.FieldNames(schema))
		}
	}
	read = slices.Clone(f.Keep)
	if gathered != nil {
		read = append(read, gathered...)
	} else {
		read = append(read, f.Column)
	}
	return unique(read), gathered, nil
}

// Dataset reads the set as the recipe says: the Keep columns and the
// feature tensor column, of Width values a row when Width is set, every
// row checked. It is Read, then Tensor.
func (f Features) Dataset(set *Set, mem memory.Allocator) (*dataset.Dataset, error) {
	ds, gathered, err := f.Read(set)
	if err != nil {
		return nil, err
	}
	return f.Tensor(ds, gathered, mem)
}

// Read reads the columns the recipe needs from the set, before any
// tensor is made of them: a caller may look at them first (a job setting
// bad rows aside). It returns the columns the tensor is to be gathered
// from, if any.
func (f Features) Read(set *Set) (ds *dataset.Dataset, gathered []string, err error) {
	read, gathered, err := f.Columns(set)
	if err != nil {
		return nil, nil, err
	}
	if ds, err = set.Dataset(read...); err != nil {
		return nil, nil, err
	}
	return ds, gathered, nil
}

// Tensor makes the feature tensor column of ds (as Read read it):
// gathering the columns gathered, and checking every row's width when
// the recipe or the columns say it.
func (f Features) Tensor(ds *dataset.Dataset, gathered []string, mem memory.Allocator) (*dataset.Dataset, error) {
	var err error
	if gathered != nil {
		if ds, err = dataset.Gather(ds, mem, f.Column, gathered...); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFeatures, err)
		}
	}
	width := f.Width
	if width == 0 && gathered != nil {
		width = len(gathered)
	}
	if idx := ds.Schema().FieldIndices(f.Column); width == 0 && len(idx) == 1 {
		width, _ = tensor.Width(ds.Schema().Field(idx[0]).Type) // 0 for a list: its rows say
	}
	if width == 0 {
		return ds, nil
	}
	if ds, err = dataset.AsTensor(ds, f.Column, width); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFeatures, err)
	}
	return ds, nil
}

func unique(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
