// Package seq runs sequence models (transformer encoders: embeddings,
// text classifiers) over token-id columns in static shapes that waste
// little.
//
// # The window is the batch
//
// A [Model] is a device.Model: the predict package gives it batches as it
// gives any device, and for a sequence model a batch is a window of rows
// (thousands). Inside a window the rows are sorted by token length
// (stable), planned into sub-batches of Rows × Tokens from a set of shapes
// declared before the first window, padded, run on an [Engine], and put
// back in window order: one output row a window row. Order, exactly-once,
// resume, set-aside and session groups stay the predict and job
// packages' own, since the window is an ordinary batch to them.
//
// A window's sub-batches run largest first (by rows × tokens², the
// attention's memory), and any session of the model whose own window has
// ended takes those not yet taken before it returns: sessions that take
// whole windows still end together, as one queue of sub-batches would.
//
// # Plans
//
// A [Planner] is a pure function from lengths to sub-batches: rows of one
// sequence bucket run together, in sub-batches as large as the token
// budget allows; with no buckets (a device that takes any shape) each
// sub-batch is padded to its own longest row. Plans are property-tested
// and fuzzed: a bijection, shapes declared, the budget kept unless rows
// exceed it alone, deterministic (a resumed job pads as the first run
// did). Under the build tag assert every window's plan is proved before
// it runs.
//
// # Padding
//
// Token ids become fixed-length ids, an attention mask, type ids and
// position ids. A padding row, and an empty row, keep one attended token:
// a fully masked row gives NaN in exports whose mask adds -inf. A row
// longer than the longest sequence is truncated at its end and counted
// ([Stats].Truncated), or set aside with [WithRefuseLong]. A null row is a
// device.RowError, set aside where the runner sets rows aside.
//
// # Outputs
//
// Per-row outputs ([batch, H]) become fixed_size_list<float32> columns;
// per-token outputs ([batch, sequence, H]) are pooled — [Mean], [CLS],
// [Last], [Max], [MeanSqrtLen], [WeightedMean], several concatenated
// ([WithPoolings]) — as sentence-transformers pools a row run alone, then
// go through the [Module]s after pooling ([Normalize]; package hfmodel's
// Dense) into an "embedding" column. A classifier's "logits" are read by
// package head, a stage of its own.
//
// # Position ids
//
// Tokens count from 0, padding slots included, as BERT's default
// position ids do; [WithPositionStart] numbers them as RoBERTa's family
// does (padding_idx + 1 onward, padding slots padding_idx). Left
// padding counts from a row's first real token.
package seq
