// Package dataset provides finite, re-runnable streams of Arrow records and
// re-chunks them into batches of a fixed number of rows. It knows nothing
// of file formats or storage: package [github.com/drainpipe/drainpipe/dataset/fileset]
// opens Parquet, Arrow IPC and CSV files as datasets.
//
// # Datasets
//
// A [Dataset] is a schema plus an iterator over records
// ([iter.Seq2][arrow.RecordBatch, error]). Every range over [Dataset.Records]
// or [Dataset.Batches] starts from the beginning: sources acquire their
// resources (open readers, files) inside the iterator, so a loop that breaks
// early releases them before the range statement returns.
//
// Constructors: [FromRecords] (in-memory records), [FromReader] (any
// array.RecordReader, so Arrow's own readers plug in), [Generate] and
// [UniformTensors] (synthetic data) and [New] (any iterator). [Skip] and
// [Take] cut rows off either end; [Concat] joins records; [Copy] writes a
// dataset's records to any writer (a sink.Writer, Arrow's IPC and Parquet
// writers).
//
// # Arrow module
//
// Records are github.com/apache/arrow-go/v18 record batches. The older,
// frozen Arrow Go module (v15, under apache/arrow) is not used: on real
// Parquet files it returned fewer rows than the footer declares without an
// error (a float column in BYTE_STREAM_SPLIT encoding read as 0 rows),
// panicked on newer logical types (geospatial, variant) and wrote
// non-nullable fixed_size_list columns as all nulls.
//
// # Tensors and bad rows
//
// Models read features from a fixed_size_list<float32>[d] column.
// [AsTensor] takes a list<float32> whose rows all have d values (what
// Parquet returns for a fixed-size list written without the Arrow schema)
// as one, zero-copy, and checks that a model can read every row; [Gather]
// builds one from scalar columns. A row a model cannot read (null, of
// another width, holding a null value) is a [RowError] naming its dataset
// row: the first such row, whatever is wrong with it.
//
// # Batching
//
// [Dataset.Batches] yields batches of exactly n rows, the last one shorter,
// across input record boundaries of any sizes (empty records are skipped).
// A batch that lies inside one input record is a zero-copy slice of it; only
// a batch that spans records is copied.
//
// # Ownership
//
// A record yielded to a loop body is borrowed: it is valid for that
// iteration only and released by the dataset afterwards. A body that keeps
// a record beyond its iteration (for example to send it to another
// goroutine) must Retain it and later Release it.
package dataset
