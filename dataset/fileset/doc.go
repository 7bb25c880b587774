// Package fileset opens input files — Parquet, Arrow IPC files and
// streams, CSV — as [dataset.Dataset] streams: lists and globs read in
// sorted order, column projection, shards ([WithShard]), and the file and
// row every row yielded comes from ([Origins]).
//
// [Read] opens files and returns their dataset; [Open] opens them once for
// their schema and declared rows and gives a [Set] whose Dataset method
// reads the columns chosen. Each format's reader has a file of its own:
// parquet.go (with parquettensor.go), ipc.go, csv.go.
//
// # Damaged files, lost rows, bad values
//
// A file's reader never panics past [Read]: a damaged or unfamiliar file
// is an error wrapping [ErrUnreadable] that names it. Reads run under a
// memory ceiling ([WithMaxMemory]) and IPC messages are bounded by the
// file's size, so a forged length fails cleanly. A Parquet read that ends
// with fewer rows than the footer declares is [ErrRowCount]. CSV column
// types come from a sample of rows ([WithCSVSample]), but for the columns
// the caller knows are numbers ([WithCSVNumbers]); a value that does not
// parse is [ErrCSVValue], with its row and column, or a null reported to
// [WithCSVBadValues].
//
// # Float tensors in Parquet
//
// A Parquet file's float32 list and fixed_size_list columns are decoded
// by the package's own decoder, straight into their Arrow buffers: rows
// are cut from the repetition levels and typed from the definition levels
// (present, null, empty, holding a null value), skipping pqarrow's list
// assembly, about half the cost of decoding them, and a bug of it that
// misplaced values on valid files (docs/upstream/ in the repository). The
// decoder proves every row boundary it crosses, the one after the last
// row of a read included: a row ends where the next level starts a row,
// or where its row group's chunk ends holding the rows the group
// declares. Levels that do not prove it are an error naming the column,
// row group and file row, never a row cut short or run on. A chunk whose
// rows may all hold one width of values (a fixed_size_list's; a list's
// whose levels divide evenly by its rows) is read page by page while its
// pages prove it: plain values after levels that are those rows',
// checked run by run in Parquet's hybrid encoding, never expanded one by
// one; from the first page that does not (a null, a dictionary, a row cut
// by the page), arrow-go's column reader reads on.
//
// # Arrow IPC
//
// arrow-go's IPC reader trusts the lengths, offsets and child sizes it
// reads; every record batch is checked with arrow-go's array.ValidateFull
// before use (lengths, offsets, child sizes, bitmaps, dictionary indices),
// an error naming the file and the record batch. Null-typed columns and
// unions, which that validator mishandles (it wants a buffer a null array
// read from IPC does not have, and panics on an empty dense union), are
// checked on a view of their data that gives them what it wants, so the
// checks stay its own (docs/upstream/arrow-go-validate-null-union.md).
package fileset
