package seq

import "context"

// The inputs a sequence model may take, by the names Hugging Face's
// exports give them. An engine feeds those its graph declares.
const (
	InputIDs      = "input_ids"
	AttentionMask = "attention_mask"
	TokenTypeIDs  = "token_type_ids"
	PositionIDs   = "position_ids"
)

// Output describes one output of a sequence model, past its batch axis:
// Width values a row, or a token (PerToken: [batch, sequence, Width],
// which the model pools into one vector a row).
type Output struct {
	Name     string
	Width    int
	PerToken bool
}

// Engine is a sequence model a device runs: it takes sub-batches of
// token ids of any planned shape. It is the part of a device that knows
// the runtime (ONNX Runtime, a compiled graph); Model does the rest.
type Engine interface {
	Outputs() []Output
	Start(ctx context.Context, cfg EngineConfig) (EngineSession, error)
}

// WarmUpper is an engine whose sessions can run the largest declared
// shape once before the first window (all rows padding), for a Model
// made WithWarmUp: a runtime whose allocator keeps what it has grown to
// (ONNX Runtime's arena) then holds the largest shape's peak from the
// start, and no window's first sub-batches grow it.
type WarmUpper interface {
	WarmUp() bool
}

// EngineConfig tells an engine session what it will run.
type EngineConfig struct {
	// Shapes are every shape a sub-batch may take, known before the
	// first: an engine may prepare each. Nil when any shape may come.
	Shapes []Shape
	// Replica, Replicas and Sessions are the device session's (see
	// device.SessionConfig): an engine that fans out over the cores keeps
	// to one when sessions or replicas run side by side.
	Replica, Replicas, Sessions int
}

// Batch is one sub-batch as an engine sees it: Rows × Tokens values a
// slice, row-major. TypeIDs and Positions are there for engines whose
// graph takes them.
type Batch struct {
	Shape                         Shape
	IDs, Mask, TypeIDs, Positions []int64
}

// EngineSession runs sub-batches, one call at a time.
type EngineSession interface {
	// Run returns one slice an output, in Outputs order: Rows × Width
	// values, or Rows × Tokens × Width for a per-token output. The slices
	// are valid until the next Run; the batch is borrowed for the call.
	Run(ctx context.Context, b *Batch) ([][]float32, error)
	// Shutdown releases the session, once.
	Shutdown(ctx context.Context) error
}
