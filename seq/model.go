package seq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/drainpipe/drainpipe/device"
)

// Model is a device.Model that runs a sequence Engine over windows: each
// batch the runner gives it is a window of rows, which it sorts by
// length, plans into sub-batches of declared shapes, pads, runs and puts
// back in window order. Padding rows of a window are never run.
type Model struct {
	engine  Engine
	planner Planner
	plan    func([]int) ([]SubBatch, error) // WithPlan's
	shapes  []Shape                         // declared; nil without buckets
	tokens  string
	typeIDs string
	text    string                              // WithText's column
	encode  func(string) ([]int64, bool, error) // and tokenizer
	// textPair and encodePair are WithTextPair's: a second text column,
	// a row encoded with the first as a pair (ids and type ids).
	textPair   string
	encodePair func(a, b string) (ids, types []int64, truncated bool, err error)
	padID      int64
	vocab      int64
	left       bool
	refuseLong bool
	poolings   []Pooling
	modules    []Module
	cols       []column
	schema     *arrow.Schema
	// positionStart is WithPositionStart's: 0 numbers tokens as BERT
	// does, padding slots included.
	positionStart int64
	warmUp        bool // WithWarmUp's

	mu    sync.Mutex
	stats Stats
	// running are the windows whose sub-batches any session may take.
	running windows
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

// PadID is the token id padding slots hold (WithPadID's, else 0): a
// server refuses rows a client padded with it, which would be attended
// as tokens.
func (m *Model) PadID() int64 { return m.padID }

// column is one output column: an engine output, pooled (and through
// the modules) if it is per token.
type column struct {
	field  arrow.Field
	output int // the engine output it comes from
	width  int // values a row in the column
	pooled int // a per-token output's width once pooled, before modules
}

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
	if len(m.poolings) == 0 {
		m.poolings = []Pooling{Mean}
	}
	if len(m.modules) > 0 && perToken != 1 {
		return nil, fmt.Errorf("seq: modules after pooling need one per-token output; the engine has %d", perToken)
	}
	var fields []arrow.Field
	for i, o := range outs {
		if o.Width < 1 {
			return nil, fmt.Errorf("seq: output %q has %d values a row", o.Name, o.Width)
		}
		c := column{output: i, width: o.Width}
		name := o.Name
		if o.PerToken {
			name = "embedding"
			if perToken > 1 || slices.ContainsFunc(outs, func(x Output) bool { return x.Name == "embedding" }) {
				name = o.Name + "_" + m.poolingName()
			}
			c.pooled = len(m.poolings) * o.Width
			c.width = c.pooled
			for k, mod := range m.modules {
				w, err := mod.OutWidth(c.width)
				if err != nil {
					return nil, fmt.Errorf("seq: module %d after pooling %q: %w", k+1, o.Name, err)
				}
				c.width = w
			}
		}
		c.field = arrow.Field{Name: name, Type: arrow.FixedSizeListOfNonNullable(int32(c.width), arrow.PrimitiveTypes.Float32)}
		m.cols = append(m.cols, c)
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

// poolingName names the poolings, joined by "+".
func (m *Model) poolingName() string {
	names := make([]string, len(m.poolings))
	for i, p := range m.poolings {
		names[i] = p.String()
	}
	return strings.Join(names, "+")
}

// Pooling names the model's poolings, joined by "+" ("mean", "cls",
// "mean+max"); "" for a model that pools nothing.
func (m *Model) Pooling() string { return m.poolingName() }

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

// Add adds o's counts to s's.
func (s *Stats) Add(o Stats) {
	s.Rows += o.Rows
	s.SubBatches += o.SubBatches
	s.Tokens += o.Tokens
	s.Slots += o.Slots
	s.Truncated += o.Truncated
	if s.Shapes == nil {
		s.Shapes = map[Shape]int64{}
	}
	for k, v := range o.Shapes {
		s.Shapes[k] += v
	}
}

func (m *Model) add(s Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Add(s)
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
	s := &session{m: m, engine: es, mem: cmp.Or[memory.Allocator](cfg.Allocator, memory.DefaultAllocator)}
	if w, ok := m.engine.(WarmUpper); ok && m.warmUp && w.WarmUp() && len(m.shapes) > 0 {
		if err := s.warmUp(ctx); err != nil {
			return nil, errors.Join(fmt.Errorf("seq: warming up: %w", err), es.Shutdown(ctx))
		}
	}
	return s, nil
}

// warmUp runs the largest declared shape (by token slots, then tokens)
// once, every row padding, as fill pads (WarmUpper).
func (s *session) warmUp(ctx context.Context) error {
	largest := s.m.shapes[0]
	for _, sh := range s.m.shapes {
		if sh.Slots() > largest.Slots() || (sh.Slots() == largest.Slots() && sh.Tokens > largest.Tokens) {
			largest = sh
		}
	}
	b := s.batch(largest)
	s.m.fill(b, SubBatch{Shape: largest}, nil, nil, nil)
	_, err := s.engine.Run(ctx, b)
	return err
}

func (m *Model) checkSchema(schema *arrow.Schema) error {
	if m.text != "" {
		for _, name := range []string{m.text, m.textPair} {
			if name == "" {
				continue
			}
			idx := schema.FieldIndices(name)
			if len(idx) != 1 {
				return fmt.Errorf("%w: no text column %q in the batch (it has %v)", ErrTokens, name, fieldNames(schema))
			}
			switch schema.Field(idx[0]).Type.(type) {
			case *arrow.StringType, *arrow.LargeStringType:
				continue
			}
			return fmt.Errorf("%w: column %q is %s, want string", ErrTokens, name, schema.Field(idx[0]).Type)
		}
		return nil
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
