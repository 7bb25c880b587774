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
// Each device session (one per replica and session group) creates one ONNX
// Runtime session at Start, for every batch size it is allowed, and
// destroys it exactly once at Shutdown. A batch's fixed_size_list or
// primitive input column is handed to ONNX Runtime where Arrow holds it,
// and each output is written straight into the new record's buffer, so a
// batch copies nothing and allocates only its output record (a list
// column is copied into a tensor bound at Start, its padding rows as
// zeros). Sessions side by side ([device.SessionConfig] Sessions or
// Replicas above 1) get one intra-op thread each unless [WithIntraOpThreads]
// says otherwise. ONNX Runtime's environment is process-wide: the package
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
