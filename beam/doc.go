// Package dpbeam runs drainpipe's batch prediction on Apache Beam (the Go
// SDK), so a job that outgrows one machine runs on an engine that
// schedules, retries and scales: Prism on one machine, Flink, Spark or
// Dataflow beyond it.
//
// [Predict] plans the inputs' units of work (job.PlanUnits: whole row
// groups of one file, PartRows rows at a time, the same whatever the
// runner's parallelism), binds the output folder to the job, reshuffles
// the units not committed yet across workers, and runs the core's job on
// each (job.WriteUnit): fixed-size padded batches, one prediction row per
// input row, counted against the file's metadata, written to one Parquet
// file a unit, committed once by a conditional write, so a bundle the
// runner retries or runs twice leaves one file. A last step checks every
// unit and writes _manifest.json and _SUCCESS. A rerun of the same job
// over the folder — after a killed pipeline, with any parallelism —
// writes only the units missing, and ends with the bytes of an
// uninterrupted run; another job is refused unless Overwrite.
//
// Device lifecycle: Beam may make several DoFn instances a worker and does
// not promise to call Teardown (Prism and Dataflow may not). A model file is
// loaded once per process and shared by reference count; the device
// sessions start and shut down inside each shard's job, so every session
// started is shut down whether or not Teardown ever runs.
package dpbeam
