// Package dataset provides finite, re-runnable streams of Arrow records and
// re-chunks them into batches of a fixed number of rows.
//
// # Datasets
//
// A [Dataset] is a schema plus an iterator over records
// ([iter.Seq2][arrow.Record, error]). Every range over [Dataset.Records] or
// [Dataset.Batches] starts from the beginning: sources acquire their
// resources (open readers, files) inside the iterator, so a loop that breaks
// early releases them before the range statement returns.
//
// Constructors: [FromRecords] (in-memory records), [FromReader] (any
// array.RecordReader, so Arrow's own readers plug in), [Files] (Parquet
// through pqarrow, Arrow IPC files and streams, CSV; lists and globs read in
// sorted order; column projection; sharding with [WithShard]), [Generate]
// and [UniformTensors] (synthetic data) and [New] (any iterator).
// [OpenFiles] opens the files once for their schema and declared rows and
// gives a [FileSet] whose Dataset reads the columns chosen. [Skip] and
// [Take] cut rows off either end; [Copy] writes a dataset's records to any
// writer (a sink.Writer, Arrow's IPC and Parquet writers). Each format's
// reader has a file of its own: parquet.go, ipc.go, csv.go.
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
// # Damaged files, lost rows, bad rows
//
// A file's reader never panics past [Files]: a damaged or unfamiliar file
// is an error wrapping [ErrUnreadable] that names it. Reads run under a
// memory ceiling ([WithMaxMemory]) and IPC messages are bounded by the
// file's size, so a forged length fails cleanly. A Parquet read that ends
// with fewer rows than the footer declares is [ErrRowCount]. [Origins]
// ([WithOrigins]) map every row yielded back to its file and file row;
// transforms report a bad row as a [RowError] naming its dataset row. CSV
// column types come from a sample of rows ([WithCSVSample]); a value that
// does not parse is [ErrCSVValue], with its row and column, or a null
// reported to [WithCSVBadValues].
//
// # Tensors
//
// Models read features from a fixed_size_list<float32>[d] column.
// [AsTensor] takes a list<float32> whose rows all have d values (what
// Parquet returns for a fixed-size list written without the Arrow schema)
// as one, zero-copy; [Gather] builds one from scalar columns.
//
// A Parquet file's float32 list and fixed_size_list columns are decoded
// by the package's own decoder, straight into their Arrow buffers: rows
// are cut from the repetition levels and typed from the definition levels
// (present, null, empty, holding a null value), skipping pqarrow's list
// assembly, about half the cost of decoding them, and a bug of it that
// misplaced values on valid files (docs/upstream/). The decoder proves
// every row boundary it crosses, the one after the last row of a read
// included: a row ends where the next level starts a row, or where its
// row group's chunk ends holding the rows the group declares. Levels that
// do not prove it are an error naming the column, row group and file row,
// never a row cut short or run on. Arrow IPC record batches are checked
// with arrow-go's array.ValidateFull before use (lengths, offsets, child sizes,
// bitmaps, dictionary indices): arrow-go's IPC reader trusts them.
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
