package seq

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ErrPlan reports a planner configuration that cannot plan: no buckets
// or batch sizes, an unordered list, a budget below the smallest shape.
var ErrPlan = errors.New("seq: bad plan configuration")

// Shape is the static shape of one sub-batch: Rows rows of Tokens tokens.
type Shape struct{ Rows, Tokens int }

// Slots is the token slots a sub-batch of the shape holds.
func (s Shape) Slots() int { return s.Rows * s.Tokens }

func (s Shape) String() string { return fmt.Sprintf("%d×%d", s.Rows, s.Tokens) }

// SubBatch is one planned sub-batch: the window rows it runs, in the
// order they take in it, and the shape they are padded to.
type SubBatch struct {
	Shape Shape
	Rows  []int
}

// Planner plans a window of rows into sub-batches. It is a pure
// function of its fields and the lengths it is given.
type Planner struct {
	// Buckets are the sequence lengths a sub-batch may be padded to,
	// ascending. Empty: each sub-batch is padded to its longest row,
	// rounded up to a multiple of Multiple (a device that takes any
	// shape); MaxLength is then the longest.
	Buckets []int
	// Multiple rounds a sub-batch's length up without buckets (4 if 0:
	// rounded to 8, the short rows of a long-tail distribution waste 7.5%
	// of their slots, seq/testdata/lengths.txt).
	Multiple int
	// MaxLength bounds a row's tokens without buckets: longer rows are
	// counted at it (truncated). With buckets, the largest bucket is.
	MaxLength int
	// BatchSizes are the rows a sub-batch may have, ascending. Empty:
	// the powers of two up to MaxRows with buckets, any number up to
	// MaxRows without.
	BatchSizes []int
	// MaxRows bounds the rows of a sub-batch (256 if 0) when BatchSizes
	// is empty.
	MaxRows int
	// MaxTokens is the token budget of a sub-batch: Rows × Tokens stays
	// within it, except where rows exceed it alone: they run in
	// sub-batches of the smallest batch size.
	MaxTokens int
}

// DefaultMaxTokens is the token budget a planner has unless told.
const DefaultMaxTokens = 16384

// check validates the planner and fills its defaults.
func (p Planner) check() (Planner, error) {
	p.Multiple = cmp.Or(p.Multiple, 4)
	p.MaxTokens = cmp.Or(p.MaxTokens, DefaultMaxTokens)
	p.MaxRows = cmp.Or(p.MaxRows, 256)
	if len(p.BatchSizes) == 0 && len(p.Buckets) > 0 {
		for b := 1; b <= p.MaxRows; b *= 2 {
			p.BatchSizes = append(p.BatchSizes, b)
		}
	}
	if err := ascending("batch sizes", p.BatchSizes); err != nil {
		return p, err
	}
	if len(p.Buckets) > 0 {
		if err := ascending("sequence buckets", p.Buckets); err != nil {
			return p, err
		}
		p.MaxLength = p.Buckets[len(p.Buckets)-1]
	} else if p.MaxLength <= 0 {
		return p, fmt.Errorf("%w: no sequence buckets and no maximum length", ErrPlan)
	}
	if p.Multiple < 1 || p.MaxTokens < 1 {
		return p, fmt.Errorf("%w: multiple %d, token budget %d", ErrPlan, p.Multiple, p.MaxTokens)
	}
	return p, nil
}

func ascending(what string, v []int) error {
	for i, x := range v {
		if x < 1 || (i > 0 && x <= v[i-1]) {
			return fmt.Errorf("%w: %s %v are not ascending positive numbers", ErrPlan, what, v)
		}
	}
	return nil
}

// rowsFor returns the largest batch size whose sub-batches of length
// tokens stay within the budget, or the smallest batch size when none
// does (a row that exceeds the budget alone).
func (p Planner) rowsFor(tokens int) int {
	if len(p.BatchSizes) == 0 {
		return max(1, min(p.MaxRows, p.MaxTokens/tokens))
	}
	best := p.BatchSizes[0]
	for _, b := range p.BatchSizes {
		if b*tokens <= p.MaxTokens {
			best = b
		}
	}
	return best
}

// Shapes returns the shapes sub-batches may take, ordered by tokens then
// rows: known before the first window, for an engine that prepares each
// (tensors allocated, a graph compiled). Without buckets it is nil: any
// length up to MaxLength may come.
func (p Planner) Shapes() ([]Shape, error) {
	p, err := p.check()
	if err != nil {
		return nil, err
	}
	var out []Shape
	for _, s := range p.Buckets {
		top := p.rowsFor(s)
		for _, b := range p.BatchSizes {
			if b <= top {
				out = append(out, Shape{Rows: b, Tokens: s})
			}
		}
	}
	return out, nil
}

// Length returns the tokens a row of n tokens runs with: n, or the
// longest a sub-batch may have when n exceeds it (the row is truncated).
func (p Planner) Length(n int) int {
	if len(p.Buckets) > 0 {
		return min(n, p.Buckets[len(p.Buckets)-1])
	}
	return min(n, p.MaxLength)
}

// Plan splits a window whose rows have the given token lengths into
// sub-batches. Rows are sorted by length (stable: equal lengths keep
// their window order); rows of one bucket run together, in sub-batches
// as large as the budget allows, and the remainder in the batch sizes
// that sum to it (no padding rows). Every window row is in exactly one
// sub-batch. A row of length 0 runs with one token slot.
func (p Planner) Plan(lengths []int) ([]SubBatch, error) {
	p, err := p.check()
	if err != nil {
		return nil, err
	}
	order := make([]int, len(lengths))
	for i := range order {
		order[i] = i
	}
	clamped := func(i int) int { return max(p.Length(lengths[i]), 1) }
	slices.SortStableFunc(order, func(a, b int) int { return clamped(a) - clamped(b) })
	var out []SubBatch
	for start := 0; start < len(order); {
		// A group: the rows padded to one length.
		tokens, end := p.group(order, start, clamped)
		top := p.rowsFor(tokens)
		for rest := order[start:end]; len(rest) > 0; {
			b := p.fit(min(len(rest), top))
			rows := rest[:min(b, len(rest))]
			if len(p.Buckets) == 0 {
				// Without buckets each sub-batch is as long as its own
				// longest row (the last: rows ascend).
				tokens = p.round(clamped(rows[len(rows)-1]))
			}
			out = append(out, SubBatch{Shape: Shape{Rows: b, Tokens: tokens}, Rows: rows})
			rest = rest[len(rows):]
		}
		start = end
	}
	return out, nil
}

// group returns the length the rows from start on are padded to and the
// end of the run of rows padded to it.
func (p Planner) group(order []int, start int, length func(int) int) (tokens, end int) {
	if len(p.Buckets) > 0 {
		i, _ := slices.BinarySearch(p.Buckets, length(order[start]))
		tokens = p.Buckets[i]
		end = start
		for end < len(order) && length(order[end]) <= tokens {
			end++
		}
		return tokens, end
	}
	// Without buckets: as many rows as the budget holds at the length
	// of the longest of them, rounded up, while that length stays within
	// a sixteenth of the shortest's (a group's padding stays small).
	maxRows := p.MaxRows
	if len(p.BatchSizes) > 0 {
		maxRows = p.BatchSizes[len(p.BatchSizes)-1]
	}
	end = start + 1
	shortest := p.round(length(order[start]))
	tokens = shortest
	for end < len(order) && end-start < maxRows {
		t := p.round(length(order[end]))
		if (end-start+1)*t > p.MaxTokens || 16*t > 17*shortest {
			break
		}
		tokens, end = t, end+1
	}
	return tokens, end
}

// smallest is the fewest rows a sub-batch has: a row over the budget
// alone runs in a sub-batch of that many.
func (p Planner) smallest() int {
	if len(p.BatchSizes) == 0 {
		return 1
	}
	return p.BatchSizes[0]
}

// round rounds a length up to a multiple of Multiple.
func (p Planner) round(n int) int { return (n + p.Multiple - 1) / p.Multiple * p.Multiple }

// fit returns the batch size a sub-batch of n rows is given: the largest
// allowed size within n, or the smallest when n is below every size (its
// other rows are padding).
func (p Planner) fit(n int) int {
	if len(p.BatchSizes) == 0 {
		return n
	}
	b := p.BatchSizes[0]
	for _, s := range p.BatchSizes {
		if s <= n {
			b = s
		}
	}
	return b
}

// DefaultBuckets returns sequence buckets spaced by a factor of 2^⅙
// from 8 up to maxLength, each rounded up to a multiple of 8, maxLength
// the last: 26 lengths up to 512. On a long-tail distribution
// (seq/testdata/lengths.txt) buckets spaced by √2 waste 15.8% of the
// token slots, by 2^¼ 10.7%, these 9.2%; and since attention costs grow
// with the square of the length, the waste in long buckets costs most:
// ONNX Runtime's CPU against a global sort padded to each sub-batch's
// longest row was 0.90× with 2^¼, 0.97× with these (BENCHMARKS.md).
func DefaultBuckets(maxLength int) []int {
	var out []int
	for k := 0; ; k++ {
		s := int(math.Ceil(math.Pow(2, float64(k)/6)-1e-9)) * 8
		if s >= maxLength {
			break
		}
		if len(out) == 0 || s > out[len(out)-1] {
			out = append(out, s)
		}
	}
	return append(out, maxLength)
}

// ParseBuckets reads a comma-separated list of ascending lengths, or
// "none" (nil: no buckets).
func ParseBuckets(s string) ([]int, error) {
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		return nil, nil
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%w: sequence bucket %q is not a number", ErrPlan, f)
		}
		out = append(out, n)
	}
	if err := ascending("sequence buckets", out); err != nil {
		return nil, err
	}
	return out, nil
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
