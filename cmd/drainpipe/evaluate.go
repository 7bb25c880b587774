package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/drainpipe/drainpipe/dataset"
	"github.com/drainpipe/drainpipe/dataset/fileset"
	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/device/cpu"
	"github.com/drainpipe/drainpipe/eval"
	"github.com/drainpipe/drainpipe/job"
	"github.com/drainpipe/drainpipe/predict"
)

// evalReport is what eval prints, and writes with --json.
type evalReport struct {
	Model string `json:"model"`
	Label string `json:"label"`
	Rows  int64  `json:"rows"`
	// RowsSetAside is the rows --set-aside took out of the metrics.
	RowsSetAside int64        `json:"rows_set_aside,omitempty"`
	Metrics      metricValues `json:"metrics"`
	Confusion    [][]int64    `json:"confusion,omitempty"` // row = label, column = predicted class
}

// metricValues are a report's metrics. A metric with no value (a ROC AUC
// over labels of one class, a macro score over no rows) is NaN, which
// JSON has no number for: it is written as null.
type metricValues map[string]float64

func (m metricValues) MarshalJSON() ([]byte, error) {
	out := make(map[string]*float64, len(m))
	for k, v := range m {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out[k] = &v
		} else {
			out[k] = nil
		}
	}
	return json.Marshal(out)
}

const evalLong = `Exact metrics of a classifier, or of a regression output, over every row,
however the rows fall into batches: accuracy, macro precision, recall and
F1, log loss, the confusion matrix; for two classes binary scores and ROC
AUC; for a regression output mean squared and absolute error.`

const evalExample = `  drainpipe eval --model model.dpmlp --input test.csv --features 'f*' --label label
  drainpipe eval --model model.onnx --input 'test/*.parquet' --label y --json report.json --plot plots/`

func evalCommand() *cobra.Command {
	c := &cobra.Command{Use: "eval --model M --input FILES --label COLUMN", Short: "Exact metrics of a model over labelled files: a table, JSON, plots", Long: evalLong, Example: evalExample, Args: noArgs("--input")}
	fs := c.Flags()
	var in inputFlags
	in.add(fs, "")
	modelPath := fs.String("model", "", "the model: a drainpipe MLP file (.dpmlp), or in a build with -tags onnx an ONNX file (.onnx) or a model folder as sentence-transformers and transformers save one (onnx/model.onnx, config.json, tokenizer.json, …)")
	label := fs.String("label", "", "the label column: class numbers 0..k-1 (or bool), or a regression's target values")
	batch := fs.Int("batch-size", 256, "rows per device batch")
	replicas := fs.Int("replicas", 1, "sessions that split each batch between them")
	sessions := fs.Int("sessions", 0, sessionsHelp)
	jsonPath := fs.String("json", "", "also write the report to this JSON file")
	value := fs.String("value", "", "evaluate this regression output (mean squared and absolute error) instead of class probabilities (default \"value\" when the model has no class probabilities)")
	plotDir := fs.String("plot", "", "draw the confusion matrix, the ROC curve (2 classes) and a histogram of the predicted class's probability into this folder (PNG)")
	overwrite := fs.Bool("overwrite", false, "replace the --json file, the --plot images and the --set-aside file if they exist")
	normalized := fs.Bool("normalize", false, "draw the confusion matrix with each label's row as fractions (its recall on the diagonal)")
	sq := defaultSequenceFlags()
	sq.add(fs, false)
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx, stdout := c.Context(), c.OutOrStdout()
		switch {
		case *modelPath == "":
			return usageError(fmt.Errorf("eval: --model is required"))
		case len(in.inputs) == 0:
			return usageError(fmt.Errorf("eval: --input is required"))
		case *label == "":
			return usageError(fmt.Errorf("eval: --label is required"))
		}
		if _, _, err := in.options(); err != nil {
			return err
		}
		outputs := [][2]string{{"--json", *jsonPath}, {"--set-aside", in.setAside}}
		for _, name := range plotNames {
			if *plotDir != "" {
				outputs = append(outputs, [2]string{"--plot", filepath.Join(*plotDir, name)})
			}
		}
		if err := in.checkWrites(*overwrite, outputs...); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		sq.maxMemory = int64(in.maxMemory)
		m, err := loadModel(*modelPath, in.featureCol, sq)
		if err != nil {
			return err
		}
		if err := sq.check(c.Flags(), m); err != nil {
			return usageError(fmt.Errorf("eval: %w", err))
		}
		if m.model, err = renameClash(m.model, *label); err != nil {
			return fmt.Errorf("eval: --label %q: %w", *label, err)
		}
		plan, err := planEval(m.model, *value)
		if err != nil {
			return err
		}
		if *plotDir != "" && plan.k == 0 {
			return fmt.Errorf("eval: --plot draws a classifier's plots; %q is a regression output", plan.value)
		}
		ev, err := eval.NewEvaluation(*label, plan.metrics)
		if err != nil {
			return err
		}
		cfg, err := in.job(cmp.Or(in.featureCol, m.feature, cpu.DefaultFeature), *label)
		if err != nil {
			return err
		}
		cfg.Model, cfg.ModelID, cfg.InputSize = m.model, m.id, m.inputSize
		cfg.BatchSize, cfg.Overwrite = *batch, *overwrite
		if m.seq != nil {
			m.sequenceJob(&cfg)
			if !in.quiet {
				fmt.Fprint(c.ErrOrStderr(), describeShapes(m.seq))
			}
		}
		cfg.Predict = []predict.Option{predict.WithReplicas(*replicas), predict.WithGroups(cmp.Or(*sessions, m.sessions))}
		cfg.Logger = slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		prog := in.progress(c.ErrOrStderr(), "evaluating")
		if prog != nil {
			cfg.Progress = prog.update
		}
		sum, err := job.Each(ctx, cfg, ev.Update)
		if prog != nil {
			prog.finish()
		}
		if errors.Is(err, fileset.ErrKeep) {
			return fmt.Errorf("eval: --label %q: %w", *label, err)
		}
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		out := plan.report(ev.Report())
		out.Label, out.RowsSetAside = *label, sum.RowsSetAside
		out.Model = *modelPath
		printEval(stdout, out)
		if *jsonPath != "" {
			if err := writeJSONFile(*jsonPath, out); err != nil {
				return fmt.Errorf("eval: %w", err)
			}
		}
		if *plotDir != "" {
			if err := os.MkdirAll(*plotDir, 0o755); err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			paths, err := drawEval(*plotDir, out, plan.rocCurves(), plan.top.values, *normalized)
			if err != nil {
				return fmt.Errorf("eval: plot: %w", err)
			}
			for _, p := range paths {
				fmt.Fprintf(stdout, "plot: %s\n", p)
			}
		}
		return nil
	}
	return c
}

// evalPlan is what eval measures for a model: a classifier's metrics (k
// classes) or a regression output's (k = 0, value names the output).
type evalPlan struct {
	k       int
	value   string
	metrics []eval.Metric
	conf    *eval.ConfusionMetric
	roc     *eval.ROCAUCMetric   // two classes
	ovr     []*eval.ROCAUCMetric // more: each class against the rest
	top     *topProbability
}

// planEval chooses the metrics from the model's outputs: a classifier's
// when it has class probabilities and value is empty, else the mean
// squared and absolute error of the value output (default "value").
func planEval(m device.Model, value string) (*evalPlan, error) {
	s, ok := m.(device.OutputSchemaer)
	if !ok {
		return nil, fmt.Errorf("eval: the model does not state its outputs")
	}
	schema := s.OutputSchema()
	if idx := schema.FieldIndices(eval.ProbabilityColumn); value == "" && len(idx) == 1 {
		list, ok := schema.Field(idx[0]).Type.(*arrow.FixedSizeListType)
		if !ok {
			return nil, fmt.Errorf("eval: output %q is %s, want a fixed_size_list of class probabilities", eval.ProbabilityColumn, schema.Field(idx[0]).Type)
		}
		k := int(list.Len())
		p := &evalPlan{k: k, conf: eval.ConfusionMatrix(k), roc: eval.ROCAUC(), top: &topProbability{}}
		p.metrics = []eval.Metric{eval.Accuracy(), eval.Precision(eval.Macro, k), eval.Recall(eval.Macro, k), eval.F1(eval.Macro, k), eval.LogLoss(), p.conf, p.top}
		if k == 2 {
			p.metrics = append(p.metrics, eval.Precision(eval.Binary, 2), eval.Recall(eval.Binary, 2), eval.F1(eval.Binary, 2), p.roc)
		} else {
			for c := range k {
				p.ovr = append(p.ovr, eval.ROCAUCOneVsRest(c))
				p.metrics = append(p.metrics, p.ovr[c])
			}
		}
		return p, nil
	}
	value = cmp.Or(value, eval.ValueColumn)
	if len(schema.FieldIndices(value)) != 1 {
		return nil, fmt.Errorf("eval: the model has no %q output (it has %s): eval needs class probabilities, or --value naming a regression output", value, schema)
	}
	opt := eval.Column(value)
	return &evalPlan{value: value, metrics: []eval.Metric{eval.MSE(opt), eval.MAE(opt)}}, nil
}

// run evaluates the model over ds and returns the report.
func (p *evalPlan) run(ctx context.Context, m device.Model, ds *dataset.Dataset, label string, opts ...predict.Option) (evalReport, error) {
	report, err := eval.Evaluate(ctx, m, ds, label, p.metrics, opts...)
	if err != nil {
		return evalReport{}, err
	}
	out := p.report(report)
	out.Label = label
	return out, nil
}

// report is what eval prints and writes of the metrics' values.
func (p *evalPlan) report(report *eval.Report) evalReport {
	out := evalReport{Rows: report.Rows, Metrics: report.Values}
	if p.k > 0 {
		delete(report.Values, p.top.Name())
		delete(report.Values, p.conf.Name()) // the accuracy again
		out.Confusion = confusionRows(p.conf, p.k)
		if len(p.ovr) > 0 {
			// scikit-learn's roc_auc_score(multi_class="ovr"): the macro
			// mean over the classes present.
			sum, n := 0.0, 0
			for _, m := range p.ovr {
				if v := m.Value(); !math.IsNaN(v) {
					sum, n = sum+v, n+1
				}
			}
			if n > 0 {
				out.Metrics["roc_auc_ovr"] = sum / float64(n)
			}
		}
	}
	return out
}

// rocCurves returns the ROC metrics to draw: the binary one, or each
// class's against the rest.
func (p *evalPlan) rocCurves() []*eval.ROCAUCMetric {
	if p.k == 2 {
		return []*eval.ROCAUCMetric{p.roc}
	}
	return p.ovr
}

// printEval prints the report as an aligned table, and the confusion
// matrix of a classifier.
func printEval(w io.Writer, r evalReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "rows\t%d\t\n", r.Rows)
	if r.RowsSetAside > 0 {
		fmt.Fprintf(tw, "set_aside\t%d\t\n", r.RowsSetAside)
	}
	for _, name := range []string{"accuracy", "precision_macro", "recall_macro", "f1_macro", "precision_binary", "recall_binary", "f1_binary", "log_loss", "roc_auc", "roc_auc_ovr", "mse", "mae"} {
		if v, ok := r.Metrics[name]; ok {
			fmt.Fprintf(tw, "%s\t%.4f\t\n", name, v)
		}
	}
	tw.Flush()
	if len(r.Confusion) == 0 {
		return
	}
	fmt.Fprintln(w, "confusion matrix (rows: label, columns: predicted class):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for p := range r.Confusion {
		fmt.Fprintf(tw, "%d\t", p)
	}
	fmt.Fprintln(tw)
	for l, row := range r.Confusion {
		fmt.Fprintf(tw, "%d\t", l)
		for _, n := range row {
			fmt.Fprintf(tw, "%d\t", n)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// topProbability collects each row's probability of its predicted class,
// for the histogram. It reports no value of its own.
type topProbability struct{ values []float64 }

func (m *topProbability) Name() string { return "top_probability" }

func (m *topProbability) Update(b *eval.Batch) error {
	probs, k, err := b.Probabilities(eval.ProbabilityColumn)
	if err != nil {
		return err
	}
	for i := range len(probs) / max(k, 1) {
		best := probs[i*k]
		for _, p := range probs[i*k : (i+1)*k] {
			best = max(best, p)
		}
		m.values = append(m.values, float64(best))
	}
	return nil
}

func (m *topProbability) Merge(other eval.Metric) error {
	o, ok := other.(*topProbability)
	if !ok {
		return fmt.Errorf("eval: merge %s with %s", m.Name(), other.Name())
	}
	m.values = append(m.values, o.values...)
	return nil
}

func (m *topProbability) Value() float64 { return 0 }
func (m *topProbability) Reset()         { m.values = m.values[:0] }

// confusionRows returns the confusion matrix's counts, a row per label.
func confusionRows(conf *eval.ConfusionMetric, k int) [][]int64 {
	rows := make([][]int64, k)
	for l := range rows {
		rows[l] = make([]int64, k)
		for p := range k {
			rows[l][p] = conf.Count(l, p)
		}
	}
	return rows
}
