package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
	"github.com/drainpipe/drainpipe/online"
	"github.com/drainpipe/drainpipe/predict"
	"github.com/drainpipe/drainpipe/seq"
)

// DefaultVersion is the version of a model whose spec names none.
const DefaultVersion = "1"

// ModelSpec is a model to serve.
type ModelSpec struct {
	// Name is the model's name in request paths and messages.
	Name string
	// Version is the one version served; "" means DefaultVersion.
	Version string
	// Platform names the model's framework in its metadata, such as
	// "onnxruntime_onnx".
	Platform string
	// Model is the device model; Input the columns it reads, one input
	// tensor each: a primitive column is a tensor of shape [n], a
	// fixed_size_list<T>[k] column one of shape [n, k].
	Model device.Model
	Input *arrow.Schema
	// Options configure the model's predictor (batch sizes, sessions,
	// replicas); the server adds its logger, which a WithLogger here
	// replaces.
	Options []predict.Option
	// Batching configures the model's online batcher (delay, queue bound,
	// timeout); the server sets its Observer, which feeds its metrics.
	Batching online.Options
	// Sequence, for a sequence model (a seq.Model), reports its tokens,
	// padding and shapes, which /metrics exports.
	Sequence SequenceStats
	// Text, for a sequence model that ships a tokenizer, encodes the
	// text its requests send into its token inputs (Input stays those).
	Text *TextModel

	// note is what the repository index says of the version served.
	note string
}

// SequenceStats is what a sequence model reports of what it ran, the
// id its padding slots hold and its planner (seq.Model has it).
type SequenceStats interface {
	Stats() seq.Stats
	Shapes() []seq.Shape
	PadID() int64
	Planner() seq.Planner
}

// model is a served model: its batcher and what its metadata says.
type model struct {
	name, version, platform string
	input                   *arrow.Schema
	inputs, outputs         []TensorMetadata
	batcher                 *online.Batcher
	warmed                  online.Stats // the batcher's counters after the warm-up
	ready                   atomic.Bool
	// users counts the requests that found the model and are not done
	// with it: it is closed once they are.
	users sync.WaitGroup
	// source is the repository file it was loaded from, if any.
	source fileState
	// note is what the repository index says of a version served: how
	// its config's batch sizes are run, where Triton would run them
	// otherwise.
	note string
	// sequence reports a sequence model's tokens; warmedSeq is what the
	// warm-up ran, left out of the metrics.
	sequence  SequenceStats
	warmedSeq seq.Stats
	text      *TextModel   // ModelSpec.Text
	textCut   atomic.Int64 // texts the tokenizer cut at the model's length
	maxRows   int          // the rows a request may hold: the queue's bound
}

// start opens the model's sessions and runs one row of zeros through them,
// which tells the output tensors and warms the device up.
func start(ctx context.Context, spec ModelSpec, logger *slog.Logger, obs online.Observer) (*model, error) {
	m := &model{name: spec.Name, version: spec.Version, platform: spec.Platform, input: spec.Input, sequence: spec.Sequence, text: spec.Text}
	if m.version == "" {
		m.version = DefaultVersion
	}
	if m.platform == "" {
		m.platform = "drainpipe"
	}
	if spec.Input == nil || spec.Input.NumFields() == 0 {
		return nil, fmt.Errorf("model %s: no input columns", spec.Name)
	}
	for _, f := range spec.Input.Fields() {
		md, err := metadata(f)
		if err != nil {
			return nil, fmt.Errorf("model %s: input %w", spec.Name, err)
		}
		m.inputs = append(m.inputs, md)
	}
	// The server's logger first, so that the spec's options may override it.
	opts := append([]predict.Option{predict.WithLogger(logger)}, spec.Options...)
	p, err := predict.New(spec.Model, opts...)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", spec.Name, err)
	}
	batching := spec.Batching
	batching.Observer = obs
	if m.batcher, err = online.NewBatcher(ctx, p, spec.Input, batching); err != nil {
		return nil, fmt.Errorf("model %s: %w", spec.Name, err)
	}
	m.maxRows = m.batcher.QueueRows()
	if err := m.warmUp(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("model %s: warm-up: %w", spec.Name, err), m.batcher.Close(context.WithoutCancel(ctx)))
	}
	m.warmed = m.batcher.Stats() // the warm-up is not an inference
	if m.sequence != nil {
		m.warmedSeq = m.sequence.Stats()
	}
	return m, nil
}

// warmUpKey marks the warm-up's context: its batch span says so, as the
// metrics leave it out.
type warmUpKey struct{}

func (m *model) warmUp(ctx context.Context) error {
	zeros := make([]*tensor, len(m.inputs))
	for i, in := range m.inputs {
		shape := []int64{1}
		for _, d := range in.Shape[1:] {
			shape = append(shape, max(d, 1)) // a sequence of one token
		}
		n, _ := elements(shape)
		d := datatypes[in.Datatype]
		data, err := d.fromRaw(make([]byte, n*rawSize(d)), n)
		if err != nil {
			return err
		}
		zeros[i] = &tensor{name: in.Name, datatype: in.Datatype, shape: shape, data: data}
	}
	rec, _, err := m.record(zeros)
	if err != nil {
		return err
	}
	defer rec.Release()
	out, err := m.batcher.Predict(context.WithValue(ctx, warmUpKey{}, true), rec)
	if err != nil {
		return err
	}
	defer out.Release()
	for _, f := range out.Schema().Fields() {
		md, err := metadata(f)
		if err != nil {
			return fmt.Errorf("output %w", err)
		}
		m.outputs = append(m.outputs, md)
	}
	return nil
}

// record turns request tensors into a record of the model's input schema.
// It checks everything a device would otherwise fail on, so a bad request
// fails alone instead of failing the batch it would share.
func (m *model) record(inputs []*tensor) (arrow.RecordBatch, int, error) {
	byName := make(map[string]*tensor, len(inputs))
	var mask *tensor
	for _, t := range inputs {
		if byName[t.name] != nil || t.name == seq.AttentionMask && mask != nil {
			return nil, 0, fmt.Errorf("input %q given twice", t.name)
		}
		if t.name == seq.AttentionMask && m.sequence != nil && m.input.FieldIndices(t.name) == nil {
			mask = t
			continue
		}
		if m.input.FieldIndices(t.name) == nil {
			return nil, 0, fmt.Errorf("input %q: model %s has no such input; its inputs are %s", t.name, m.name, names(m.inputs))
		}
		byName[t.name] = t
	}
	rows := -1
	cols := make([]arrow.Array, 0, m.input.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, f := range m.input.Fields() {
		t := byName[f.Name]
		if t == nil {
			return nil, 0, fmt.Errorf("input %q missing; model %s takes %s", f.Name, m.name, names(m.inputs))
		}
		want := m.inputs[i]
		n, err := checkShape(t, want)
		if err != nil {
			return nil, 0, err
		}
		if rows >= 0 && n != rows {
			return nil, 0, fmt.Errorf("input %q: %d rows (shape %v), but input %q has %d", t.name, n, t.shape, m.input.Field(0).Name, rows)
		}
		rows = n
		var offsets []int32
		if _, isSeq := f.Type.(*arrow.ListType); isSeq && t.ends != nil {
			offsets = t.ends
		} else if isSeq && m.sequence != nil {
			if t, offsets, err = m.tokenRows(t, mask); err != nil {
				return nil, 0, err
			}
		}
		col, err := column(f, t, n, offsets)
		if err != nil {
			return nil, 0, err
		}
		cols = append(cols, col)
	}
	if mask != nil && !slices.ContainsFunc(m.input.Fields(), func(f arrow.Field) bool { _, ok := f.Type.(*arrow.ListType); return ok }) {
		return nil, 0, fmt.Errorf("input %q: model %s takes %s, not tokens", mask.name, m.name, names(m.inputs))
	}
	return array.NewRecordBatch(m.input, cols, int64(rows)), rows, nil
}

// checkShape checks a tensor's datatype and shape against the model's
// input and returns its rows.
func checkShape(t *tensor, want TensorMetadata) (int, error) {
	if t.datatype != want.Datatype {
		return 0, fmt.Errorf("input %q: datatype %s, model takes %s", t.name, t.datatype, want.Datatype)
	}
	ok := len(t.shape) == len(want.Shape) && t.shape[0] >= 0
	for d := 1; ok && d < len(want.Shape); d++ {
		ok = t.shape[d] == want.Shape[d] || (want.Shape[d] == -1 && t.shape[d] >= 0)
	}
	if !ok {
		return 0, fmt.Errorf("input %q: shape %v, model takes %v (-1: any number of rows, or of tokens)", t.name, t.shape, want.Shape)
	}
	return int(t.shape[0]), nil
}

// column makes the Arrow column of field f over a tensor's elements; a
// list column's rows end at offsets, or each has the tokens its shape
// says (offsets nil).
func column(f arrow.Field, t *tensor, rows int, offsets []int32) (arrow.Array, error) {
	d := datatypes[t.datatype]
	width := 1
	l, isList := f.Type.(*arrow.FixedSizeListType)
	if isList {
		width = int(l.Len())
	}
	if seqType, ok := f.Type.(*arrow.ListType); ok {
		width = int(t.shape[1])
		if i, err := d.check(t.data); err != nil {
			return nil, fmt.Errorf("input %q: element %d (row %d): %w", t.name, i, i/max(width, 1), err)
		}
		vals := d.column(t.data)
		defer vals.Release()
		if offsets == nil {
			offsets = make([]int32, rows+1)
			for r := range offsets {
				offsets[r] = int32(r * width)
			}
		}
		list := array.NewData(seqType, rows, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))}, []arrow.ArrayData{vals}, 0, 0)
		defer list.Release()
		return array.MakeFromData(list), nil
	}
	if i, err := d.check(t.data); err != nil {
		return nil, fmt.Errorf("input %q: element %d (row %d): %w", t.name, i, i/max(width, 1), err)
	}
	vals := d.column(t.data)
	defer vals.Release()
	if isList {
		list := array.NewData(l, rows, []*memory.Buffer{nil}, []arrow.ArrayData{vals}, 0, 0)
		defer list.Release()
		return array.MakeFromData(list), nil
	}
	return array.MakeFromData(vals), nil
}

// tensors copies the requested columns of a prediction record into
// tensors; want empty means all.
func (m *model) tensors(out arrow.RecordBatch, want []string) ([]*tensor, error) {
	rows := int(out.NumRows())
	pick := want
	if len(pick) == 0 {
		pick = make([]string, len(m.outputs))
		for i, o := range m.outputs {
			pick[i] = o.Name
		}
	}
	ts := make([]*tensor, 0, len(pick))
	for _, name := range pick {
		idx := out.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("output %q: not in the predictions (%s)", name, out.Schema())
		}
		t, err := outputTensor(name, out.Column(idx[0]), rows)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func outputTensor(name string, col arrow.Array, rows int) (*tensor, error) {
	if col.NullN() > 0 {
		return nil, fmt.Errorf("output %q: %d nulls, which a tensor cannot hold", name, col.NullN())
	}
	elems, off, n, shape := col, 0, rows, []int64{int64(rows)}
	if l, ok := col.(*array.FixedSizeList); ok {
		k := int(l.DataType().(*arrow.FixedSizeListType).Len())
		elems, off, n, shape = l.ListValues(), l.Offset()*k, rows*k, []int64{int64(rows), int64(k)}
		if elems.NullN() > 0 {
			return nil, fmt.Errorf("output %q: null elements, which a tensor cannot hold", name)
		}
	}
	dt, ok := datatypeName(elems.DataType())
	if !ok {
		return nil, fmt.Errorf("output %q: type %s has no tensor datatype", name, col.DataType())
	}
	data, err := datatypes[dt].values(elems, off, n)
	if err != nil {
		return nil, fmt.Errorf("output %q: %w", name, err)
	}
	return &tensor{name: name, datatype: dt, shape: shape, data: data}, nil
}

// emptyOutputs answers a request of zero rows without the device.
func (m *model) emptyOutputs(want []string) []*tensor {
	var ts []*tensor
	for _, o := range m.outputs {
		if len(want) > 0 && !slices.Contains(want, o.Name) {
			continue
		}
		shape := append([]int64{0}, o.Shape[1:]...)
		ts = append(ts, &tensor{name: o.Name, datatype: o.Datatype, shape: shape, data: emptySlice(o.Datatype)})
	}
	return ts
}

func emptySlice(datatype string) any {
	d, _ := datatypes[datatype].fromRaw(nil, 0)
	return d
}

// checkOutputs checks the requested output names before anything runs.
func (m *model) checkOutputs(want []string) error {
	seen := map[string]bool{}
	for _, name := range want {
		if seen[name] {
			return fmt.Errorf("output %q requested twice", name)
		}
		seen[name] = true
		if !slices.ContainsFunc(m.outputs, func(o TensorMetadata) bool { return o.Name == name }) {
			return fmt.Errorf("output %q: model %s has no such output; its outputs are %s", name, m.name, names(m.outputs))
		}
	}
	return nil
}

func names(ts []TensorMetadata) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = fmt.Sprintf("%s %s %v", t.Name, t.Datatype, t.Shape)
	}
	return strings.Join(s, ", ")
}
