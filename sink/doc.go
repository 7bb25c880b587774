// Package sink writes Arrow records to Parquet or Arrow IPC files
// atomically: the file appears under its name only once it is complete, so
// a crashed job never leaves a file that looks finished.
//
// A [Writer] writes to a temporary file beside the destination; Commit
// flushes, syncs and renames it into place, Abort removes it.
//
// A Parquet file's row groups are each encoded into memory and then
// copied into the file in order, so that several can be encoded at once
// (WithEncoders). Tensor columns (fixed_size_list of floats with no null,
// the predictions and embeddings a job writes) are encoded by the sink
// itself, their levels written as runs and their values copied; the
// other columns by arrow-go. The file has no copy of each column chunk's
// metadata after its pages (readers take the footer's, which is whole).
//
// Parquet files are written with the Arrow schema stored in them, so a
// fixed_size_list column reads back as one, with its nullability. (The
// frozen Arrow v15 module read a non-nullable fixed_size_list back as all
// nulls, apache/arrow-go#584; a round-trip test pins the fix.)
package sink
