// Package onnx is a drainpipe device that runs ONNX models (exported from
// PyTorch, scikit-learn, TensorFlow) with ONNX Runtime, through
// github.com/yalue/onnxruntime_go.
//
// It is built only with the onnx build tag (it needs cgo), so the default
// build stays pure Go:
//
//	go test -tags onnx ./device/onnx/
//
// # The library
//
// ONNX Runtime is a shared library loaded at run time. Its path comes from
// [WithLibrary], else the DRAINPIPE_ONNXRUNTIME environment variable, else
// .onnxruntime/libonnxruntime.so.1 found upwards from the working folder,
// where scripts/fetch-onnxruntime.sh puts it.
//
// # Sessions
//
// Each device session (one per replica) creates an ONNX Runtime session at
// Start and destroys it exactly once at Shutdown. Its input and output
// tensors are bound once at the padded batch shape and reused for every
// batch (an AdvancedSession), so a steady-state batch allocates only its
// output record. ONNX Runtime's environment is process-wide: the package
// counts the sessions that use it and destroys it with the last one.
//
// # Columns and tensors
//
// Inputs and outputs are matched by name: the model input "features" reads
// the Arrow column "features" (or the column [WithInput] maps it to). A
// fixed_size_list column (or a list whose rows all have the right length)
// becomes a [batch, d] tensor, a scalar column a [batch] tensor. Outputs
// become columns of the same names: [batch] as a scalar column, [batch, k…]
// as a fixed_size_list of the k… values. float32, float64, int64 and int32
// tensors are supported. The model's declared names, element types and
// shapes are checked against the batch schema at Start, before the first
// batch, and a mismatch is an error naming the input, expected and got.
package onnx
