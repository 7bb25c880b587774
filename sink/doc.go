// Package sink writes Arrow records to Parquet or Arrow IPC files
// atomically: the file appears under its name only once it is complete, so
// a crashed job never leaves a file that looks finished.
//
// A [Writer] writes to a temporary file beside the destination; Commit
// flushes, syncs and renames it into place, Abort removes it.
//
// Parquet files are written with the Arrow schema stored in them, so a
// fixed_size_list column reads back as one. Arrow v15 loses the values of a
// non-nullable fixed_size_list field written to Parquet (they read back as
// nulls; fixed upstream only in v18), so such fields are written as
// nullable: the values survive, and a test pins that.
package sink
