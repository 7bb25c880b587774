// Package eval evaluates a model over a dataset with exact metrics, however
// the dataset's size relates to the batch size.
//
// TPUEstimator's evaluation needs every batch to have the same size, so users
// drop or hand-pad the last batch and get metrics that are slightly off;
// samplers that duplicate rows to fill the last batch skew them too. Here the
// model runs through the same Predictor as prediction (fixed-size batches, a
// padded tail, replicas, the device lifecycle), the padding rows are dropped
// before the host sees them, and the metrics run on the host over the real
// rows only: every row counted exactly once.
//
// # Metrics
//
// A [Metric] is a streaming accumulator: Update with a batch, Value at the
// end, Merge with another accumulator of the same kind (to combine shards or
// replicas), Reset to start over. Built in: [Accuracy], [Precision],
// [Recall] and [F1] (binary or macro-averaged), [LogLoss], [MSE], [MAE],
// [ROCAUC] (exact), [ConfusionMatrix] and [Mean] of any per-row value. A
// user-defined metric implements the four methods; [Batch] gives it the
// labels and predictions as plain slices.
//
// # Columns
//
// Labels come from one dataset column: integers (or bool) for
// classification, numbers for regression. Metrics read the predicted class
// from the "class" column, probabilities from the "probabilities" column
// (a fixed_size_list<float32>[k]), as the cpu device writes them, and a
// regression's prediction from "value"; the [Column] option names another
// for any metric ([Clip] sets LogLoss's clipping). Files hold the families:
// classification.go, probability.go, regression.go.
package eval
