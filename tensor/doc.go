// Package tensor reads Arrow columns as row-major float32 matrices without
// copying, and writes matrices back as Arrow columns.
//
// A tensor column is a fixed_size_list<float32>[d], or a list<float32>
// (large_list too) whose rows all have d values, which is how Parquet
// returns a fixed-size list written without the Arrow schema. Either way
// the child values buffer already holds the rows back to back, so [Float32]
// returns a view of it, n×d, row-major. Never write into that view: it is
// Arrow's buffer, shared with every other holder of the column.
package tensor
