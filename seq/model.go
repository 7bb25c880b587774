package seq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
)

// Option configures a Model.
type Option func(*Model)

// WithTokens names the token-id column (default "input_ids").
func WithTokens(column string) Option { return func(m *Model) { m.tokens = column } }

// WithTypeIDs names a column of token type ids, one a token of the
// token column's row; without it they are zeros.
func WithTypeIDs(column string) Option { return func(m *Model) { m.typeIDs = column } }

// WithPlanner sets the buckets, batch sizes and token budget sub-batches
// are planned with.
func WithPlanner(p Planner) Option { return func(m *Model) { m.planner = p } }

// WithPlan replaces the planner's plan with another (lengths already
// cut at the longest sequence), for comparing strategies: no shapes are
// declared then, and the token budget is the plan's own affair.
func WithPlan(plan func(lengths []int) ([]SubBatch, error)) Option {
	return func(m *Model) { m.plan = plan }
}

// WithPadID sets the token id padding slots hold (the model's
// pad_token_id; 0 by default).
func WithPadID(id int64) Option { return func(m *Model) { m.padID = id } }

// WithVocab sets the vocabulary's size: an id at or past it is a row
// error naming the row, not a failed sub-batch.
func WithVocab(n int64) Option { return func(m *Model) { m.vocab = n } }

// WithLeftPadding pads rows at their start, as decoder models want;
// position ids then count from a row's first real token.
func WithLeftPadding() Option { return func(m *Model) { m.left = true } }

// WithRefuseLong makes a row longer than the longest sequence a row
// error (set aside where the runner sets rows aside) instead of truncating
// it at its end.
func WithRefuseLong() Option { return func(m *Model) { m.refuseLong = true } }

// WithPooling sets how per-token outputs are pooled (Mean by default).
func WithPooling(p Pooling) Option { return func(m *Model) { m.pooling = p } }

// WithNormalize scales pooled vectors to unit length.
func WithNormalize() Option { return func(m *Model) { m.normalize = true } }

// WithLabels names the classes of a "logits" output (a model's
// id2label), written as the label column.
func WithLabels(labels []string) Option { return func(m *Model) { m.labels = slices.Clone(labels) } }

// WithText makes the model read text from a string column and encode
// it to token ids itself (a tokenizer's Encode), instead of reading a
// token column: for a server that takes text. A job tokenizes on its
// input side instead (tokenizer.Tokens), ahead of the device.
func WithText(column string, encode func(string) ([]int64, error)) Option {
	return func(m *Model) { m.text, m.encode = column, encode }
}

// LogitsOutput is the output name that makes a classifier: its argmax is
// written as the label column and its softmax probability as score.
const LogitsOutput = "logits"

// Model is a device.Model that runs a sequence Engine over windows: each
// batch the runner gives it is a window of rows, which it sorts by
// length, plans into sub-batches of declared shapes, pads, runs and puts
// back in window order. Padding rows of a window are never run.
type Model struct {
	engine     Engine
	planner    Planner
	plan       func([]int) ([]SubBatch, error) // WithPlan's
	shapes     []Shape                         // declared; nil without buckets
	tokens     string
	typeIDs    string
	text       string                        // WithText's column
	encode     func(string) ([]int64, error) // and tokenizer
	padID      int64
	vocab      int64
	left       bool
	refuseLong bool
	pooling    Pooling
	normalize  bool
	labels     []string
	cols       []column
	schema     *arrow.Schema

	mu    sync.Mutex
	stats Stats
}

var (
	_ device.Model          = (*Model)(nil)
	_ device.OutputSchemaer = (*Model)(nil)
	_ device.ShortBatcher   = (*Model)(nil)
)

// ShortBatches reports that a window may have any number of rows
// (device.ShortBatcher): its device shapes are the sub-batches', so a
// short window is run as it is, never padded to the window's size.
func (m *Model) ShortBatches() bool { return true }

// column is one output column: an engine output, pooled or not, or a
// classifier's label or score.
type column struct {
	field  arrow.Field
	output int // the engine output it comes from
	width  int
	kind   int
}

const (
	vectorColumn = iota
	probabilitiesColumn
	classColumn
	scoreColumn
	labelColumn
)

// New makes a Model over an engine.
func New(e Engine, opts ...Option) (*Model, error) {
	m := &Model{engine: e, tokens: InputIDs}
	for _, o := range opts {
		o(m)
	}
	var err error
	if m.planner, err = m.planner.check(); err != nil {
		return nil, err
	}
	if m.shapes, err = m.planner.Shapes(); err != nil {
		return nil, err
	}
	if m.plan != nil {
		m.shapes = nil
	}
	outs := e.Outputs()
	perToken := 0
	for _, o := range outs {
		if o.PerToken {
			perToken++
		}
	}
	var fields []arrow.Field
	for i, o := range outs {
		if o.Width < 1 {
			return nil, fmt.Errorf("seq: output %q has %d values a row", o.Name, o.Width)
		}
		name := o.Name
		if o.PerToken {
			name = "embedding"
			if perToken > 1 || slices.ContainsFunc(outs, func(x Output) bool { return x.Name == "embedding" }) {
				name = o.Name + "_" + m.pooling.String()
			}
		}
		m.cols = append(m.cols, column{field: arrow.Field{Name: name, Type: arrow.FixedSizeListOfNonNullable(int32(o.Width), arrow.PrimitiveTypes.Float32)}, output: i, width: o.Width})
		if o.Name == LogitsOutput && !o.PerToken {
			if len(m.labels) > 0 && len(m.labels) != o.Width {
				return nil, fmt.Errorf("seq: %d labels for %d logits", len(m.labels), o.Width)
			}
			m.cols = append(m.cols,
				column{field: arrow.Field{Name: "probabilities", Type: arrow.FixedSizeListOfNonNullable(int32(o.Width), arrow.PrimitiveTypes.Float32)}, output: i, width: o.Width, kind: probabilitiesColumn},
				column{field: arrow.Field{Name: "class", Type: arrow.PrimitiveTypes.Int64}, output: i, width: o.Width, kind: classColumn},
				column{field: arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float32}, output: i, width: o.Width, kind: scoreColumn})
			if len(m.labels) > 0 {
				m.cols = append(m.cols, column{field: arrow.Field{Name: "label", Type: arrow.BinaryTypes.String}, output: i, width: o.Width, kind: labelColumn})
			}
		}
	}
	for _, c := range m.cols {
		fields = append(fields, c.field)
	}
	m.schema = arrow.NewSchema(fields, nil)
	if dup := duplicate(m.schema); dup != "" {
		return nil, fmt.Errorf("seq: two output columns named %q", dup)
	}
	return m, nil
}

func duplicate(s *arrow.Schema) string {
	seen := map[string]bool{}
	for _, f := range s.Fields() {
		if seen[f.Name] {
			return f.Name
		}
		seen[f.Name] = true
	}
	return ""
}

// OutputSchema returns the prediction columns (device.OutputSchemaer).
func (m *Model) OutputSchema() *arrow.Schema { return m.schema }

// Shapes returns the sub-batch shapes declared before the first window,
// or nil when sub-batches are padded to their longest row.
func (m *Model) Shapes() []Shape { return slices.Clone(m.shapes) }

// Planner returns the planner sub-batches are planned with, its
// defaults filled in.
func (m *Model) Planner() Planner { return m.planner }

// Stats returns what the model has run so far, over every session.
func (m *Model) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Shapes = maps.Clone(s.Shapes)
	return s
}

// Stats counts what a Model ran.
type Stats struct {
	Rows       int64 // real rows run
	SubBatches int64
	Tokens     int64 // real tokens run
	Slots      int64 // token slots run, padding included
	Truncated  int64 // rows cut at the longest sequence
	Shapes     map[Shape]int64
}

// PaddingWaste returns the fraction of token slots that held padding.
func (s Stats) PaddingWaste() float64 {
	if s.Slots == 0 {
		return 0
	}
	return 1 - float64(s.Tokens)/float64(s.Slots)
}

func (m *Model) add(s Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Rows += s.Rows
	m.stats.SubBatches += s.SubBatches
	m.stats.Tokens += s.Tokens
	m.stats.Slots += s.Slots
	m.stats.Truncated += s.Truncated
	if m.stats.Shapes == nil {
		m.stats.Shapes = map[Shape]int64{}
	}
	for k, v := range s.Shapes {
		m.stats.Shapes[k] += v
	}
}

// Start checks the batch schema and starts an engine session.
func (m *Model) Start(ctx context.Context, cfg device.SessionConfig) (device.Session, error) {
	if err := m.checkSchema(cfg.Schema); err != nil {
		return nil, err
	}
	es, err := m.engine.Start(ctx, EngineConfig{Shapes: m.Shapes(), Replica: cfg.Replica, Replicas: cfg.Replicas, Sessions: cfg.Sessions})
	if err != nil {
		return nil, err
	}
	return &session{m: m, engine: es, mem: cmp.Or[memory.Allocator](cfg.Allocator, memory.DefaultAllocator), batches: map[Shape]*Batch{}}, nil
}

func (m *Model) checkSchema(schema *arrow.Schema) error {
	if m.text != "" {
		idx := schema.FieldIndices(m.text)
		if len(idx) != 1 {
			return fmt.Errorf("%w: no text column %q in the batch (it has %v)", ErrTokens, m.text, fieldNames(schema))
		}
		switch schema.Field(idx[0]).Type.(type) {
		case *arrow.StringType, *arrow.LargeStringType:
			return nil
		}
		return fmt.Errorf("%w: column %q is %s, want string", ErrTokens, m.text, schema.Field(idx[0]).Type)
	}
	for _, name := range []string{m.tokens, m.typeIDs} {
		if name == "" {
			continue
		}
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			return fmt.Errorf("%w: no column %q in the batch (it has %v)", ErrTokens, name, fieldNames(schema))
		}
		if err := CheckTokenType(schema.Field(idx[0]).Type); err != nil {
			return fmt.Errorf("column %q: %w", name, err)
		}
	}
	return nil
}

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

type session struct {
	m       *Model
	engine  EngineSession
	mem     memory.Allocator
	batches map[Shape]*Batch // reused from window to window (see batch)
	down    bool
}

func (s *session) Shutdown(ctx context.Context) error {
	if s.down {
		return errors.New("seq: shutdown twice")
	}
	s.down = true
	return s.engine.Shutdown(ctx)
}

// Predict runs one window.
func (s *session) Predict(ctx context.Context, b device.Batch) (arrow.RecordBatch, error) {
	m := s.m
	schema := b.Record.Schema()
	var col arrow.Array
	if m.text != "" {
		encoded, err := s.encodeText(b)
		if err != nil {
			return nil, err
		}
		defer encoded.Release()
		col = encoded
	} else {
		col = b.Record.Column(schema.FieldIndices(m.tokens)[0])
	}
	toks, err := newTokenRows(col)
	if err != nil {
		return nil, err
	}
	var types *tokenRows
	if m.typeIDs != "" {
		if types, err = newTokenRows(b.Record.Column(schema.FieldIndices(m.typeIDs)[0])); err != nil {
			return nil, err
		}
	}
	live := b.Rows()
	lengths := make([]int, live)
	var st Stats
	for i := range live {
		n, err := toks.length(i)
		if err == nil && types != nil {
			if tn, terr := types.length(i); terr != nil || tn != n {
				err = cmp.Or(terr, fmt.Errorf("%d type ids for %d tokens", tn, n))
				return nil, &device.RowError{Row: int64(i), Column: m.typeIDs, Err: err}
			}
		}
		if err == nil && n > m.planner.Length(n) {
			if m.refuseLong {
				err = fmt.Errorf("%w: %d tokens, the longest is %d", ErrTooLong, n, m.planner.Length(n))
			}
			st.Truncated++
		}
		// Every row's ids are checked before any sub-batch runs: a bad
		// row costs its window one run, not the sub-batches before it.
		if err == nil {
			err = toks.check(i, m.planner.Length(n), m.vocab)
		}
		if err == nil && types != nil {
			if terr := types.check(i, m.planner.Length(n), 0); terr != nil {
				return nil, &device.RowError{Row: int64(i), Column: m.typeIDs, Err: terr}
			}
		}
		if err != nil {
			return nil, &device.RowError{Row: int64(i), Column: m.tokens, Err: err}
		}
		lengths[i] = n
	}
	var plan []SubBatch
	if m.plan != nil {
		cut := make([]int, len(lengths))
		for i, n := range lengths {
			cut[i] = m.planner.Length(n)
		}
		plan, err = m.plan(cut)
	} else {
		plan, err = m.planner.Plan(lengths)
	}
	if err != nil {
		return nil, err
	}
	if checkPlans || m.plan != nil {
		if err := checkPlan(plan, lengths, m.planner, m.shapes, m.plan == nil); err != nil {
			return nil, fmt.Errorf("seq: window %d: %w", b.Index, err)
		}
	}
	rows := int(b.Record.NumRows())
	outs := newOutputs(s.mem, m.engine.Outputs(), rows)
	defer outs.release()
	st.Shapes = map[Shape]int64{}
	for _, sb := range plan {
		batch := s.batch(sb.Shape)
		m.fill(batch, sb, toks, types, lengths)
		res, err := s.engine.Run(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("seq: window %d, sub-batch %s: %w", b.Index, sb.Shape, err)
		}
		if err := m.scatter(outs, res, sb, lengths); err != nil {
			return nil, fmt.Errorf("seq: window %d, sub-batch %s: %w", b.Index, sb.Shape, err)
		}
		st.SubBatches++
		st.Slots += int64(sb.Shape.Slots())
		st.Shapes[sb.Shape]++
		for _, r := range sb.Rows {
			st.Tokens += int64(m.planner.Length(lengths[r]))
		}
	}
	st.Rows = int64(live)
	m.add(st)
	return m.record(s.mem, outs, rows)
}

// encodeText encodes the text of a window's real rows (WithText) into a
// token column; padding rows are empty lists. A null text is a row
// error.
func (s *session) encodeText(b device.Batch) (arrow.Array, error) {
	texts := b.Record.Column(b.Record.Schema().FieldIndices(s.m.text)[0])
	lb := array.NewListBuilder(s.mem, arrow.PrimitiveTypes.Int64)
	defer lb.Release()
	vals := lb.ValueBuilder().(*array.Int64Builder)
	for i := range int(b.Record.NumRows()) {
		lb.Append(true)
		if i >= b.Rows() {
			continue
		}
		if texts.IsNull(i) {
			return nil, &device.RowError{Row: int64(i), Column: s.m.text, Err: errors.New("null text")}
		}
		var text string
		switch t := texts.(type) {
		case *array.String:
			text = t.Value(i)
		case *array.LargeString:
			text = t.Value(i)
		}
		ids, err := s.m.encode(text)
		if err != nil {
			return nil, &device.RowError{Row: int64(i), Column: s.m.text, Err: err}
		}
		vals.AppendValues(ids, nil)
	}
	return lb.NewArray(), nil
}

// batch returns the session's reusable sub-batch of a shape: one a
// declared shape, or without declared shapes (which may be many) one
// scratch batch, grown to the largest run.
func (s *session) batch(sh Shape) *Batch {
	key := sh
	if s.m.shapes == nil {
		key = Shape{}
	}
	b, ok := s.batches[key]
	if !ok {
		b = &Batch{}
		s.batches[key] = b
	}
	n := sh.Slots()
	if cap(b.IDs) < n {
		b.IDs, b.Mask, b.TypeIDs, b.Positions = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	}
	b.Shape = sh
	b.IDs, b.Mask, b.TypeIDs, b.Positions = b.IDs[:n], b.Mask[:n], b.TypeIDs[:n], b.Positions[:n]
	return b
}

// span returns where a row's n tokens sit among a sub-batch row's
// tokens slots: from first on. A row of no tokens runs as one padding
// token, attended, as padding rows do (a fully masked row gives NaN in
// exports whose mask adds -inf).
func (m *Model) span(n, tokens int) (first, count int) {
	count = max(n, 1)
	if m.left {
		return tokens - count, count
	}
	return 0, count
}

// fill writes a sub-batch's ids, mask, type ids and position ids, of
// rows already checked.
func (m *Model) fill(b *Batch, sb SubBatch, toks, types *tokenRows, lengths []int) {
	S := sb.Shape.Tokens
	for k := range sb.Shape.Rows {
		ids, mask := b.IDs[k*S:(k+1)*S], b.Mask[k*S:(k+1)*S]
		typ, pos := b.TypeIDs[k*S:(k+1)*S], b.Positions[k*S:(k+1)*S]
		for j := range ids {
			ids[j], mask[j], typ[j], pos[j] = m.padID, 0, 0, 0
		}
		n := 0
		if k < len(sb.Rows) {
			n = m.planner.Length(lengths[sb.Rows[k]])
		}
		first, count := m.span(n, S)
		for j := range count {
			mask[first+j], pos[first+j] = 1, int64(j)
		}
		if !m.left {
			for j := first + count; j < S; j++ {
				pos[j] = int64(j) // as Hugging Face's default position ids
			}
		}
		if n == 0 {
			continue
		}
		row := sb.Rows[k]
		toks.copyRow(row, ids[first:first+n])
		if types != nil {
			types.copyRow(row, typ[first:first+n])
		}
	}
}

// outputs holds a window's output values, one slice an engine output,
// in window order.
type outputs struct {
	bufs []*memory.Buffer
	vals [][]float32
}

func newOutputs(mem memory.Allocator, outs []Output, rows int) *outputs {
	o := &outputs{}
	for _, out := range outs {
		buf := memory.NewResizableBuffer(mem)
		buf.Resize(rows * out.Width * 4)
		vals := arrow.Float32Traits.CastFromBytes(buf.Bytes())
		clear(vals) // padding rows of the window hold zeros
		o.bufs, o.vals = append(o.bufs, buf), append(o.vals, vals)
	}
	return o
}

func (o *outputs) release() {
	for _, b := range o.bufs {
		b.Release()
	}
}

// scatter copies a sub-batch's results to its rows' places in the
// window, pooling per-token outputs.
func (m *Model) scatter(o *outputs, res [][]float32, sb SubBatch, lengths []int) error {
	outs := m.engine.Outputs()
	if len(res) != len(outs) {
		return fmt.Errorf("the engine returned %d outputs, it declares %d", len(res), len(outs))
	}
	S := sb.Shape.Tokens
	for i, out := range outs {
		w := out.Width
		per := w
		if out.PerToken {
			per = S * w
		}
		if len(res[i]) != sb.Shape.Rows*per {
			return fmt.Errorf("output %q has %d values, want %d", out.Name, len(res[i]), sb.Shape.Rows*per)
		}
		for k, row := range sb.Rows {
			dst := o.vals[i][row*w : (row+1)*w]
			src := res[i][k*per : (k+1)*per]
			if !out.PerToken {
				copy(dst, src)
				continue
			}
			first, count := m.span(m.planner.Length(lengths[row]), S)
			m.pooling.pool(dst, src, w, first, count)
			if m.normalize {
				normalize(dst)
			}
		}
	}
	return nil
}

// record makes the window's output record.
func (m *Model) record(mem memory.Allocator, o *outputs, rows int) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(m.cols))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range m.cols {
		switch c.kind {
		case vectorColumn:
			vals := array.NewData(arrow.PrimitiveTypes.Float32, rows*c.width, []*memory.Buffer{nil, o.bufs[c.output]}, nil, 0, 0)
			list := array.NewData(c.field.Type, rows, []*memory.Buffer{nil}, []arrow.ArrayData{vals}, 0, 0)
			cols[i] = array.MakeFromData(list)
			vals.Release()
			list.Release()
		default:
			cols[i] = m.classes(mem, c, o.vals[c.output], rows)
		}
	}
	return array.NewRecordBatch(m.schema, cols, int64(rows)), nil
}

// classes makes a classifier's column from its logits: the softmax
// probabilities, the class (argmax), its probability, or its label.
func (m *Model) classes(mem memory.Allocator, c column, logits []float32, rows int) arrow.Array {
	var b array.Builder
	switch c.kind {
	case probabilitiesColumn:
		b = array.NewFixedSizeListBuilderWithField(mem, int32(c.width), arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32})
	case classColumn:
		b = array.NewInt64Builder(mem)
	case scoreColumn:
		b = array.NewFloat32Builder(mem)
	default:
		b = array.NewStringBuilder(mem)
	}
	defer b.Release()
	probs := make([]float32, c.width)
	for r := range rows {
		best := softmax(probs, logits[r*c.width:(r+1)*c.width])
		switch b := b.(type) {
		case *array.FixedSizeListBuilder:
			b.Append(true)
			b.ValueBuilder().(*array.Float32Builder).AppendValues(probs, nil)
		case *array.Int64Builder:
			b.Append(int64(best))
		case *array.Float32Builder:
			b.Append(probs[best])
		case *array.StringBuilder:
			b.Append(m.labels[best])
		}
	}
	return b.NewArray()
}

// checkPlan proves a plan: every row in exactly one sub-batch, each
// sub-batch within its shape, the shape declared (with buckets) and
// within the budget unless its rows are the fewest a sub-batch has.
func checkPlan(plan []SubBatch, lengths []int, p Planner, shapes []Shape, budget bool) error {
	seen := make([]bool, len(lengths))
	for _, sb := range plan {
		if len(sb.Rows) == 0 || len(sb.Rows) > sb.Shape.Rows {
			return fmt.Errorf("sub-batch %s holds %d rows", sb.Shape, len(sb.Rows))
		}
		if shapes != nil && !slices.Contains(shapes, sb.Shape) {
			return fmt.Errorf("sub-batch %s is not a declared shape", sb.Shape)
		}
		if budget && sb.Shape.Slots() > p.MaxTokens && sb.Shape.Rows > p.smallest() {
			return fmt.Errorf("sub-batch %s exceeds the budget of %d tokens", sb.Shape, p.MaxTokens)
		}
		for _, r := range sb.Rows {
			if r < 0 || r >= len(lengths) || seen[r] {
				return fmt.Errorf("row %d planned twice or out of the window", r)
			}
			seen[r] = true
			if max(p.Length(lengths[r]), 1) > sb.Shape.Tokens {
				return fmt.Errorf("row %d of %d tokens in a sub-batch of %d", r, lengths[r], sb.Shape.Tokens)
			}
		}
	}
	for r, ok := range seen {
		if !ok {
			return fmt.Errorf("row %d not planned", r)
		}
	}
	return nil
}
