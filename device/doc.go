// Package device is the contract between drainpipe's runners (package
// predict) and the devices that run models (device/cpu, device/onnx, your
// own), in the manner of database/sql/driver: interfaces and plain types
// only, importing nothing but Arrow, so a device author needs nothing else.
//
// # The contract
//
// A [Model] starts [Session]s; a session predicts one padded [Batch] at a
// time and is shut down exactly once. Every batch has the static shape the
// session was started with ([SessionConfig]): BatchSize rows (or one of
// BatchSizes), the input columns plus the bool column [PaddingColumn],
// true for the padding rows at its end. Predictions have one row per batch
// row; those of padding rows are dropped by the runner. A row the device
// cannot predict is reported as a [RowError].
//
// # Optional capabilities
//
// A model may also implement one-method interfaces that runners look for
// with a type assertion: [OutputSchemaer] (the predictions' schema, known
// before running) and [BatchSizer] (the batch sizes it accepts).
package device
