// Package pad pads a short Arrow record to a fixed number of rows and strips
// the padding again.
//
// # Static shape
//
// An accelerator (or a compiled model) wants one batch shape. The final batch
// of a finite dataset is usually short, so [Padder.Pad] extends it to the full
// size: the real rows come first, then zero-valued rows (never nulls), and a
// non-nullable bool column named [Column] ("is_padding") marks which rows are
// padding. Full batches get the column too, all false, so every batch has the
// same schema.
//
// # Types
//
// Feature columns may be of any integer or floating-point width (float16
// included), bool, string and binary (and their large variants), fixed-size
// binary, date, time, timestamp, duration, decimal, fixed_size_list (tensors),
// list and large_list, and struct, recursively. Any other type is rejected
// with an error naming the column and its type ([ErrUnsupportedType]).
//
// # Ownership
//
// Pad and Strip return new records that the caller must Release. Both are
// zero-copy where they can be: a full batch shares its columns with the
// input, and Strip slices.
package pad
