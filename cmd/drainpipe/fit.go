package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"gonum.org/v1/gonum/mat"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/job"
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
	var in inputFlags
	in.add(fs, cpu.DefaultFeature)
	label := fs.String("label", "", "the label column: class numbers 0..k-1 (or bool)")
	output := fs.String("output", "", "the model file to write (.dpmlp)")
	overwrite := fs.Bool("overwrite", false, "replace --output if it exists")
	holdout := fs.Float64("holdout", 0.2, "the fraction of each class's rows held out and evaluated, not fitted (drawn at random, --seed); 0 fits every row")
	seed := fs.Uint64("seed", 1, "the seed of the hold-out's draw")
	l2 := fs.Float64("l2", 1e-4, "L2 penalty on the weights")
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stdout, stderr := c.Context(), c.OutOrStdout(), c.ErrOrStderr()
		switch {
		case len(in.inputs) == 0:
			return usageError(fmt.Errorf("fit: --input is required"))
		case *label == "":
			return usageError(fmt.Errorf("fit: --label is required"))
		case *output == "":
			return usageError(fmt.Errorf("fit: --output is required"))
		case *holdout < 0 || *holdout >= 1:
			return usageError(fmt.Errorf("fit: --holdout %v, want 0 or more and less than 1", *holdout))
		case !strings.EqualFold(filepath.Ext(*output), ".dpmlp"):
			return usageError(fmt.Errorf("fit: --output %s: fit writes a drainpipe MLP, named .dpmlp (ONNX models come from other trainers)", *output))
		}
		if err := in.checkWrites(*overwrite, [2]string{"--output", *output}, [2]string{"--set-aside", in.setAside}); err != nil {
			return fmt.Errorf("fit: %w", err)
		}
		column := in.featureCol
		cfg, err := in.job(column, *label)
		if err != nil {
			return err
		}
		cfg.Overwrite = *overwrite
		prog := in.progress(stderr, "reading")
		if prog != nil {
			cfg.Progress = prog.update
		}
		rows := &labelledRows{label: *label, column: column}
		sum, err := job.Read(ctx, cfg, rows.add)
		if prog != nil {
			prog.finish()
		}
		if err != nil {
			return fmt.Errorf("fit: %w", err)
		}
		if sum.RowsSetAside > 0 {
			fmt.Fprintf(stderr, "drainpipe: fit: %d rows set aside in %s\n", sum.RowsSetAside, in.setAside)
		}
		if len(rows.labels) == 0 {
			return fmt.Errorf("fit: the input has no rows")
		}
		x, labels, width := rows.x, rows.labels, rows.width
		classes := slices.Max(labels) + 1
		n := len(labels)
		x, labels, fitted := stratify(x, labels, width, classes, *holdout, *seed)
		if warning := holdoutWarning(labels[fitted:], classes); warning != "" && fitted < n {
			fmt.Fprintln(stderr, "drainpipe: fit:", warning)
		}
		if fitted < 1 || classes < 2 {
			return fmt.Errorf("fit: %d rows of %d classes to fit: too few", fitted, classes)
		}
		m, err := cpu.FitSoftmaxRegression(mat.NewDense(fitted, width, x[:fitted*width]), labels[:fitted], classes, *l2)
		if err != nil {
			return err
		}
		m.Feature = column
		if err := m.SaveFile(*output); err != nil { // whole, or not at all
			return err
		}
		fmt.Fprintf(stdout, "fitted %s: softmax regression, %d features, %d classes, on %d rows\n", *output, width, classes, fitted)
		if fitted == n {
			return nil
		}
		held, err := heldOut(memory.DefaultAllocator, x[fitted*width:], labels[fitted:], width, column, *label)
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

// labelledRows collects every row's features (row-major) and class label.
type labelledRows struct {
	label, column string
	x             []float64
	labels        []int
	width         int
}

// add takes a record's rows; an error about a row counts it within rec.
func (l *labelledRows) add(rec arrow.RecordBatch) error {
	col := rec.Column(rec.Schema().FieldIndices(l.column)[0])
	if l.width == 0 {
		if list, ok := col.(array.ListLike); ok && rec.NumRows() > 0 {
			b, e := list.ValueOffsets(0)
			l.width = int(e - b)
		}
	}
	vals, err := tensor.Float32(col, l.width)
	if err != nil {
		return columnError(err, l.column)
	}
	for _, v := range vals {
		l.x = append(l.x, float64(v))
	}
	// eval's reading of a label column: integers or bool, no nulls.
	classes, err := (&eval.Batch{Labels: rec.Column(rec.Schema().FieldIndices(l.label)[0])}).LabelClasses()
	if err != nil {
		return columnError(err, l.label)
	}
	for i, c := range classes {
		if c < 0 {
			return &eval.RowError{Row: int64(i), Column: l.label, Err: fmt.Errorf("label %d, want a class number from 0", c)}
		}
		l.labels = append(l.labels, int(c))
	}
	return nil
}

// columnError names the column of an error about one row; one about no
// row (the column's type) names the column in its text.
func columnError(err error, column string) error {
	if re := (*dataset.RowError)(nil); errors.As(err, &re) {
		return &dataset.RowError{Row: re.Row, Column: column, Err: err}
	}
	return fmt.Errorf("column %q: %w", column, err)
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

// stratify orders the rows for a hold-out: every class's rows drawn at
// random (seeded), a holdout fraction of each class moved to the end, so
// the held-out rows hold the classes as the data does, whatever order the
// file is in. It returns the rows, their labels and how many are fitted.
func stratify(x []float64, labels []int, width, classes int, holdout float64, seed uint64) ([]float64, []int, int) {
	byClass := make([][]int, classes)
	for i, l := range labels {
		byClass[l] = append(byClass[l], i)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var fit, held []int
	for _, rows := range byClass {
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		n := int(math.Round(holdout * float64(len(rows))))
		fit, held = append(fit, rows[n:]...), append(held, rows[:n]...)
	}
	slices.Sort(fit) // the fitted rows in file order: the fit does not depend on the draw's order
	order := append(fit, held...)
	outX := make([]float64, 0, len(x))
	outL := make([]int, 0, len(labels))
	for _, i := range order {
		outX = append(outX, x[i*width:(i+1)*width]...)
		outL = append(outL, labels[i])
	}
	return outX, outL, len(fit)
}

// holdoutWarning says what makes the held-out metrics misleading: a class
// with no held-out row.
func holdoutWarning(held []int, classes int) string {
	seen := make([]bool, classes)
	for _, l := range held {
		seen[l] = true
	}
	var missing []string
	for c, ok := range seen {
		if !ok {
			missing = append(missing, strconv.Itoa(c))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("the held-out rows hold no row of class %s (too few rows of it for --holdout): their metrics leave it out", strings.Join(missing, ", "))
}
