package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/tensor"
)

const fitLong = `Fits a softmax regression (gonum's L-BFGS) to labelled rows, held in
memory, writes it as a drainpipe model, and evaluates it on held-out
rows. Models trained elsewhere (PyTorch, scikit-learn, TensorFlow) come
in as ONNX: predict --model m.onnx in a build with -tags onnx.`

const fitExample = `  drainpipe fit --input train.csv --features 'f*' --label label --output model.dpmlp
  drainpipe fit --input 'train/*.parquet' --label y --holdout 0.1 --seed 7 --output model.dpmlp`

func fitCommand() *cobra.Command {
	c := &cobra.Command{Use: "fit --input FILES --label COLUMN --output MODEL.dpmlp", Short: "Fit a softmax regression and evaluate it on held-out rows", Long: fitLong, Example: fitExample, Args: noArgs("--input")}
	fs := c.Flags()
	var inputs, features listFlag
	fs.Var(&inputs, "input", "labelled input files or glob patterns (.parquet, .arrow, .arrows, .csv); repeatable")
	label := fs.String("label", "", "the label column: class numbers 0..k-1 (or bool)")
	fs.Var(&features, "features", "gather the scalar columns matching these patterns (such as 'f*') as the features")
	featureCol := fs.String("feature-column", cpu.DefaultFeature, "the tensor column of features (when not --features); the model reads it by this name")
	output := fs.String("output", "", "the model file to write (.dpmlp)")
	holdout := fs.Float64("holdout", 0.2, "the fraction of rows (the last ones) held out and evaluated, not fitted; 0 fits every row")
	l2 := fs.Float64("l2", 1e-4, "L2 penalty on the weights")
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stdout := c.Context(), c.OutOrStdout()
		switch {
		case len(inputs) == 0:
			return usageError(fmt.Errorf("fit: --input is required"))
		case *label == "":
			return usageError(fmt.Errorf("fit: --label is required"))
		case *output == "":
			return usageError(fmt.Errorf("fit: --output is required"))
		case *holdout < 0 || *holdout >= 1:
			return fmt.Errorf("fit: --holdout %v, want 0 or more and less than 1", *holdout)
		}
		var origins fileset.Origins
		column := *featureCol
		// The label is never a feature, whatever the patterns match.
		feat := fileset.Features{Column: column, Gather: features, Keep: []string{*label}, Exclude: []string{*label}}
		set, err := fileset.Open(inputs, append(feat.Options(), fileset.WithOrigins(&origins))...)
		if err != nil {
			return err
		}
		mem := memory.DefaultAllocator
		ds, err := feat.Dataset(set, mem, nil)
		if err != nil {
			return fmt.Errorf("fit: %w", err)
		}
		x, labels, width, err := readLabelled(ds, *label, column, &origins)
		if err != nil {
			return err
		}
		classes := slices.Max(labels) + 1
		n := len(labels)
		fitted := n - int(float64(n)**holdout)
		if fitted < 1 || classes < 2 {
			return fmt.Errorf("fit: %d rows of %d classes to fit: too few", fitted, classes)
		}
		m, err := cpu.FitSoftmaxRegression(mat.NewDense(fitted, width, x[:fitted*width]), labels[:fitted], classes, *l2)
		if err != nil {
			return err
		}
		m.Feature = column
		if err := m.SaveFile(*output); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "fitted %s: softmax regression, %d features, %d classes, on %d rows\n", *output, width, classes, fitted)
		if fitted == n {
			return nil
		}
		held, err := heldOut(mem, x[fitted*width:], labels[fitted:], width, column, *label)
		if err != nil {
			return err
		}
		defer held.Release()
		plan, err := planEval(m, "")
		if err != nil {
			return err
		}
		out, err := plan.run(ctx, m, dataset.FromRecords(held.Schema(), held), *label, predict.WithBatchSize(256))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "held out: %d rows\n", out.Rows)
		printEval(stdout, out)
		return nil
	}
	return c
}

// readLabelled reads every row's features (row-major) and class label.
func readLabelled(ds *dataset.Dataset, label, column string, origins *fileset.Origins) (x []float64, labels []int, width int, err error) {
	li := ds.Schema().FieldIndices(label)[0]
	fi := ds.Schema().FieldIndices(column)[0]
	row := int64(0)
	for rec, err := range ds.Records() {
		if err != nil {
			return nil, nil, 0, err
		}
		col := rec.Column(fi)
		if width == 0 {
			if list, ok := col.(array.ListLike); ok && rec.NumRows() > 0 {
				b, e := list.ValueOffsets(0)
				width = int(e - b)
			}
		}
		vals, err := tensor.Float32(col, width)
		if err != nil {
			return nil, nil, 0, located(err, origins, row, column)
		}
		for _, v := range vals {
			x = append(x, float64(v))
		}
		// eval's reading of a label column: integers or bool, no nulls.
		classes, err := (&eval.Batch{Labels: rec.Column(li)}).LabelClasses()
		if err != nil {
			return nil, nil, 0, located(err, origins, row, label)
		}
		for i, l := range classes {
			if l < 0 {
				return nil, nil, 0, located(&eval.RowError{Row: int64(i), Err: fmt.Errorf("label %d, want a class number from 0", l)}, origins, row, label)
			}
			labels = append(labels, int(l))
		}
		row += rec.NumRows()
	}
	if len(labels) == 0 {
		return nil, nil, 0, fmt.Errorf("fit: the input has no rows")
	}
	return x, labels, width, nil
}

// located names the file and file row of an error about a row of the
// record that starts at dataset row start; an error about no one row
// (a label column's type) names the column alone.
func located(err error, origins *fileset.Origins, start int64, column string) error {
	if re := (*dataset.RowError)(nil); errors.As(err, &re) {
		err = &dataset.RowError{Row: re.Row, Column: column, Err: err}
	}
	if located := origins.LocateError(err, start); located != err {
		return fmt.Errorf("fit: %w", located)
	}
	return fmt.Errorf("fit: column %q: %w", column, err)
}

// heldOut builds the held-out rows as one record of the label and the
// feature tensor.
func heldOut(mem memory.Allocator, x []float64, labels []int, width int, column, label string) (arrow.RecordBatch, error) {
	buf, vals := tensor.NewBuffer(mem, len(x))
	for i, v := range x {
		vals[i] = float32(v)
	}
	feats := tensor.NewFixedSizeList(buf, len(labels), width)
	defer feats.Release()
	b := array.NewInt64Builder(mem)
	defer b.Release()
	for _, l := range labels {
		b.Append(int64(l))
	}
	ys := b.NewArray()
	defer ys.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: label, Type: arrow.PrimitiveTypes.Int64}, {Name: column, Type: feats.DataType()}}, nil)
	return array.NewRecordBatch(schema, []arrow.Array{ys, feats}, int64(len(labels))), nil
}
