// Package dpbeam runs drainpipe's batch prediction on Apache Beam (the Go
// SDK), so a job that outgrows one machine runs on an engine that
// schedules, retries and scales: Prism on one machine, Flink, Spark or
// Dataflow beyond it.
//
// [Predict] expands the input patterns into shards (a file, or part of a
// Parquet file's row groups), reshuffles them across workers, and runs the
// core's job (package job) on each: fixed-size padded batches, one
// prediction row per input row, counted against the file's metadata,
// written atomically to one Parquet file a shard with a name that is the
// same on every attempt, so a retried shard rewrites its file rather than
// adding rows. A last step writes _manifest.json and _SUCCESS once every
// shard has committed.
//
// Device lifecycle: Beam may make several DoFn instances a worker and does
// not promise to call Teardown (Prism and Dataflow may not). A model file is
// loaded once per process and shared by reference count; the device
// sessions start and shut down inside each shard's job, so every session
// started is shut down whether or not Teardown ever runs.
package dpbeam
