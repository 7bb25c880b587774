// Package predict runs a model over a dataset in fixed-size, padded batches
// and streams the predictions back, shutting the device down on every path.
//
// It is TensorFlow's TPUEstimator.predict for Go, minus its traps.
//
// # The device
//
// A device implements [device.Model] and [device.Session], the contract of
// package device (in the manner of database/sql/driver): Start a session
// for a batch size, Predict one padded batch at a time, Shutdown once. The
// Predictor owns the session's lifecycle; the device never sees a channel.
//
// # Batches
//
// The Predictor cuts the dataset into batches of exactly the batch size
// ([WithBatchSize]); the final short batch is padded with zero-valued rows
// and every batch carries the bool column pad.Column ("is_padding"), so the
// device sees one static shape. The model is told the batch size in
// [device.SessionConfig] and each batch's padding count in [device.Batch].
// A model whose device shapes are its own ([device.ShortBatcher], such as
// a sequence model, whose batch is a window of rows) gets the final batch
// as it is, padded only to a multiple of the replicas.
//
// # The contract
//
// [Predictor.Predict] returns a channel with one [Result] per batch:
//
//   - one prediction row per input row, in input order; padding rows are
//     dropped before the consumer sees them (unless [WithPadding]);
//   - the session starts before the first batch and shuts down exactly
//     once: when the input is drained, when ctx is cancelled, when the
//     model fails or panics, when a hook fails;
//   - the channel closes only after Shutdown has returned, so when
//     `for r := range ch` ends, the device is down and no goroutine of the
//     run is left;
//   - a failure arrives as the last Result, with Err set.
//
// Drain the channel or cancel the context: either one shuts the device
// down. [Predictor.All] is the same run as an iterator, for a plain for
// loop; leaving the loop early shuts the device down before the loop
// statement returns.
//
// # Replicas, prefetch, allowed batch sizes
//
// [WithReplicas] runs n sessions side by side, TPUEstimator's replicas: each
// global batch is split into n zero-copy slices of batch size / n rows, run
// concurrently, and put back together in order; a replica whose slice is
// all padding still runs. [WithPrefetch] reads, batches and pads in a
// goroutine of its own, up to k batches ahead of the device.
// [WithBatchSizes] lets the final batch be padded only to the smallest
// allowed size that holds it (TF Serving's allowed_batch_sizes). [Stats]
// say where a run spent its time.
//
// # Session groups
//
// [WithGroups] runs several session groups, each taking whole batches:
// each runs a padded batch through its replica sessions with the hooks
// around it, the model's rows checked, the passthrough columns put back
// and panics turned into errors. Package online batches requests that
// arrive one by one over a Predictor's groups, which it reaches through
// an internal package: a user's surface is Predict and All here, and
// online's Batcher and Stream.
//
// # Ownership
//
// A Result's Record belongs to the receiver, which must Release it. A record
// yielded by All is borrowed for one iteration.
//
// # Errors
//
// Errors name the batch index and what was expected and got. Callers branch
// with errors.Is on [ErrRowCount], [ErrPanic], [ErrColumn],
// [ErrOutputSchema], [ErrBatchSize], context.DeadlineExceeded and the
// sentinels of the dataset and pad packages.
package predict
