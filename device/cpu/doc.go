// Package cpu is a drainpipe device that runs float32 models on the CPU with
// gonum's BLAS.
//
// # Models
//
// [MLP] is a multilayer perceptron: dense layers with ReLU, tanh, sigmoid or
// identity activations and a softmax output. A softmax-regression model is
// an MLP with one layer ([NewSoftmaxRegression]).
//
// # Input and output
//
// The model reads one feature column, a fixed_size_list<float32>[d] (or a
// list<float32> whose rows all have d values, as Parquet returns it), with
// no nulls. It reads the column's values zero-copy as a row-major n×d
// matrix. It outputs two columns: "class" (int64, the most probable class)
// and "probabilities" (fixed_size_list<float32>[k], the softmax output).
//
// # Sessions
//
// A session allocates its scratch matrices once at Start, for the batch
// size it is given, and drops them at Shutdown, so a steady-state batch
// allocates only its output record.
//
// # Kernels
//
// A layer starts its output at the bias and lets the matrix product add to
// it; ReLU is one pass over the batch, branch-free, with AVX2 assembly on
// amd64 (the purego build tag leaves it out). Softmax and argmax run in
// float32.
//
// # File format
//
// [MLP.Save] and [Load] use a small little-endian binary format:
//
//	magic       8 bytes  "DPMLP\x00\x00\x01"
//	feature     uint32 length, then that many bytes of UTF-8 (column name)
//	layers      uint32 count L ≥ 1
//	per layer   uint32 in, uint32 out, uint32 activation
//	            in×out float32 weights, row-major (input-major)
//	            out float32 biases
//	checksum    uint32 CRC-32 (IEEE) of every byte before it
//
// Activations are numbered as the [Activation] constants. Each layer's in
// equals the previous layer's out; the last layer's activation is softmax.
package cpu
