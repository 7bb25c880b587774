package head

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
)

// Logits is the name of the column a head reads by default.
const Logits = "logits"

// ErrHead reports a head that does not fit its model's outputs.
var ErrHead = errors.New("head: does not fit the model")

// Function is what a head applies to the logits.
type Function int

const (
	// Softmax: single-label classification.
	Softmax Function = iota
	// Sigmoid: one logit (a cross-encoder's relevance), or multi-label
	// classification.
	Sigmoid
	// None: regression; the logits are the values.
	None
)

func (f Function) String() string {
	return [...]string{"softmax", "sigmoid", "none"}[f]
}

// Pick returns the function transformers' pipeline applies for a
// config.json's num_labels and problem_type: none for regression,
// sigmoid for one label or multi_label_classification, softmax else.
func Pick(numLabels int, problemType string) Function {
	switch {
	case problemType == "regression":
		return None
	case numLabels == 1 || problemType == "multi_label_classification":
		return Sigmoid
	}
	return Softmax
}

// Head says how to read a logits column.
type Head struct {
	Column   string   // the logits column (default Logits)
	Function Function // applied to each logit
	Labels   []string // id2label, in id order: the label column
}

// Model is a device.Model whose predictions carry a head's columns
// after its wrapped model's.
type Model struct {
	inner  device.Model
	head   Head
	width  int
	schema *arrow.Schema
}

var (
	_ device.Model          = (*Model)(nil)
	_ device.OutputSchemaer = (*Model)(nil)
	_ device.ShortBatcher   = (*Model)(nil)
)

// Wrap puts a head over a model that states its outputs
// (device.OutputSchemaer) and has a logits column of
// fixed_size_list<float32>.
func Wrap(m device.Model, h Head) (*Model, error) {
	if h.Column == "" {
		h.Column = Logits
	}
	os, ok := m.(device.OutputSchemaer)
	if !ok {
		return nil, fmt.Errorf("%w: the model does not state its outputs", ErrHead)
	}
	schema := os.OutputSchema()
	idx := schema.FieldIndices(h.Column)
	if len(idx) != 1 {
		return nil, fmt.Errorf("%w: no %q output among %v", ErrHead, h.Column, names(schema))
	}
	fsl, ok := schema.Field(idx[0]).Type.(*arrow.FixedSizeListType)
	if !ok || fsl.Elem().ID() != arrow.FLOAT32 {
		return nil, fmt.Errorf("%w: output %q is %s, want fixed_size_list<float32>", ErrHead, h.Column, schema.Field(idx[0]).Type)
	}
	width := int(fsl.Len())
	if len(h.Labels) > 0 && len(h.Labels) != width {
		return nil, fmt.Errorf("%w: %d labels for %d logits", ErrHead, len(h.Labels), width)
	}
	h.Labels = slices.Clone(h.Labels)
	fields := slices.Clone(schema.Fields())
	for _, f := range columns(h, width) {
		if len(schema.FieldIndices(f.Name)) > 0 {
			return nil, fmt.Errorf("%w: the model has an output named %q already", ErrHead, f.Name)
		}
		fields = append(fields, f)
	}
	return &Model{inner: m, head: h, width: width, schema: arrow.NewSchema(fields, nil)}, nil
}

// columns are the fields a head adds.
func columns(h Head, width int) []arrow.Field {
	if width == 1 {
		return []arrow.Field{{Name: "score", Type: arrow.PrimitiveTypes.Float32}}
	}
	var out []arrow.Field
	if h.Function != None {
		out = append(out, arrow.Field{Name: "probabilities", Type: arrow.FixedSizeListOfNonNullable(int32(width), arrow.PrimitiveTypes.Float32)})
	}
	out = append(out, arrow.Field{Name: "class", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float32})
	if len(h.Labels) > 0 {
		out = append(out, arrow.Field{Name: "label", Type: arrow.BinaryTypes.String})
	}
	return out
}

func names(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

// Unwrap returns the wrapped model.
func (m *Model) Unwrap() device.Model { return m.inner }

// Head returns the head.
func (m *Model) Head() Head { return m.head }

// OutputSchema returns the wrapped model's outputs and the head's.
func (m *Model) OutputSchema() *arrow.Schema { return m.schema }

// ShortBatches passes the wrapped model's capability on.
func (m *Model) ShortBatches() bool {
	sb, ok := m.inner.(device.ShortBatcher)
	return ok && sb.ShortBatches()
}

// Start starts a session of the wrapped model.
func (m *Model) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	s, err := m.inner.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	mem := cfg.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &session{m: m, inner: s, mem: mem}, nil
}

type session struct {
	m     *Model
	inner device.Session
	mem   memory.Allocator
}

func (s *session) Shutdown(ctx context.Context) error { return s.inner.Shutdown(ctx) }

// Predict runs the wrapped session and adds the head's columns.
func (s *session) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	out, err := s.inner.Predict(ctx, b)
	if err != nil {
		return nil, err
	}
	defer out.Release()
	idx := out.Schema().FieldIndices(s.m.head.Column)
	if len(idx) != 1 {
		return nil, fmt.Errorf("head: the model's predictions have no %q column", s.m.head.Column)
	}
	list, ok := out.Column(idx[0]).(*array.FixedSizeList)
	if !ok || list.NullN() > 0 || list.Offset() != 0 {
		return nil, fmt.Errorf("head: column %q is not a dense fixed_size_list", s.m.head.Column)
	}
	logits := list.ListValues().(*array.Float32).Float32Values()
	cols := slices.Clone(out.Columns())
	for _, c := range cols {
		c.Retain()
	}
	added := s.m.columns(s.mem, logits, int(out.NumRows()))
	cols = append(cols, added...)
	rec := array.NewRecordBatch(s.m.schema, cols, out.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}
