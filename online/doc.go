// Package online batches prediction requests that arrive one by one —
// from any number of goroutines ([Batcher]) or on a channel ([Stream]) —
// into the static batch shapes a device takes, over a
// [predict.Predictor]'s session groups.
//
// A batch closes when it is full, or when its oldest row has waited the
// maximum delay, and is padded to the smallest allowed batch size that
// holds it (predict.WithBatchSizes). The queue is bounded: a Batcher
// refuses a request beyond it at once ([ErrOverloaded]); a Stream slows its
// producer. Requests that expire or are cancelled leave the queue at once;
// nothing a caller does can wedge the dispatcher; Close answers what is
// queued, then shuts each session down once.
//
// [Options] is the one place its knobs live (the shape of TF Serving's
// BasicBatchScheduler::Options and Triton's dynamic_batching block). The
// Predictor's batch sizes, session groups, replicas, hooks, passthrough
// columns and allocator apply; options that only Predict and All apply
// (WithPrefetch, WithPadding, WithSetAside) are refused when a Batcher or
// Stream is made, not ignored.
package online
