package seq

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

var (
	// ErrTokens reports a token column of a type that holds no token ids.
	ErrTokens = errors.New("seq: not a token column")
	// ErrNullRow reports a null token row: a row error, set aside where
	// the runner sets rows aside.
	ErrNullRow = errors.New("null token list")
	// ErrBadToken reports a negative token id, or one past the
	// vocabulary.
	ErrBadToken = errors.New("token id out of range")
	// ErrTooLong reports a row longer than the longest sequence, where
	// rows are not truncated.
	ErrTooLong = errors.New("row longer than the longest sequence")
)

// CheckTokenType reports whether a column type can hold token ids:
// list, large_list or fixed_size_list of int32 or int64.
func CheckTokenType(dt arrow.DataType) error {
	var elem arrow.DataType
	switch t := dt.(type) {
	case *arrow.ListType:
		elem = t.Elem()
	case *arrow.LargeListType:
		elem = t.Elem()
	case *arrow.FixedSizeListType:
		elem = t.Elem()
	default:
		return fmt.Errorf("%w: type %s, want a list of int32 or int64", ErrTokens, dt)
	}
	switch elem.ID() {
	case arrow.INT32, arrow.INT64:
		return nil
	}
	return fmt.Errorf("%w: type %s: its values are %s, want int32 or int64", ErrTokens, dt, elem)
}

// tokenRows reads the rows of a token column without copying them.
type tokenRows struct {
	list   array.ListLike
	int32s []int32
	int64s []int64
}

func newTokenRows(col arrow.Array) (*tokenRows, error) {
	if err := CheckTokenType(col.DataType()); err != nil {
		return nil, err
	}
	list := col.(array.ListLike)
	t := &tokenRows{list: list}
	switch v := list.ListValues().(type) {
	case *array.Int32:
		t.int32s = v.Int32Values()
	case *array.Int64:
		t.int64s = v.Int64Values()
	}
	if list.ListValues().NullN() > 0 {
		// Checked per row where it matters: a null id is a row error.
		t.int32s, t.int64s = nil, nil
	}
	return t, nil
}

// length returns row i's token count; a null row is ErrNullRow.
func (t *tokenRows) length(i int) (int, error) {
	if t.list.IsNull(i) {
		return 0, ErrNullRow
	}
	start, end := t.list.ValueOffsets(i)
	return int(end - start), nil
}

// check checks the first n ids of row i: none null, none negative, none
// at or past the vocabulary's size (if not 0).
func (t *tokenRows) check(i, n int, vocab int64) error {
	start, _ := t.list.ValueOffsets(i)
	bad := func(j int, id int64) error {
		return fmt.Errorf("%w: token %d is %d, the vocabulary has %d", ErrBadToken, j, id, vocab)
	}
	switch {
	case t.int64s != nil:
		for j, id := range t.int64s[start : int(start)+n] {
			if id < 0 || (vocab > 0 && id >= vocab) {
				return bad(j, id)
			}
		}
	case t.int32s != nil:
		for j, v := range t.int32s[start : int(start)+n] {
			if id := int64(v); id < 0 || (vocab > 0 && id >= vocab) {
				return bad(j, id)
			}
		}
	default:
		vals := t.list.ListValues()
		for j := range n {
			k := int(start) + j
			if vals.IsNull(k) {
				return fmt.Errorf("token %d is null", j)
			}
			var id int64
			switch v := vals.(type) {
			case *array.Int32:
				id = int64(v.Value(k))
			case *array.Int64:
				id = v.Value(k)
			}
			if id < 0 || (vocab > 0 && id >= vocab) {
				return bad(j, id)
			}
		}
	}
	return nil
}

// copyRow writes the first len(dst) ids of row i, checked, into dst.
func (t *tokenRows) copyRow(i int, dst []int64) {
	start, _ := t.list.ValueOffsets(i)
	switch {
	case t.int64s != nil:
		copy(dst, t.int64s[start:])
	case t.int32s != nil:
		for j, v := range t.int32s[start : int(start)+len(dst)] {
			dst[j] = int64(v)
		}
	default:
		vals := t.list.ListValues()
		for j := range dst {
			switch v := vals.(type) {
			case *array.Int32:
				dst[j] = int64(v.Value(int(start) + j))
			case *array.Int64:
				dst[j] = v.Value(int(start) + j)
			}
		}
	}
}
