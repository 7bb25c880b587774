package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unsafe"
)

// decodeJSON decodes a JSON array of the n elements of shape, flat or
// nested (as the REST protocol allows; a nested array's nesting must be
// the shape's); number parsing and range checks stay encoding/json's. It
// stops at the first element past n, so a request's memory is bounded by
// the shape it declares, whatever its body holds.
func decodeJSON[T any](raw json.RawMessage, shape []int64, n int) ([]T, error) {
	// The shape is the client's word: reserve no more than the data can
	// hold (an element takes two bytes at least), so a small body cannot
	// make the server allocate gigabytes.
	vals := make([]T, 0, min(n, len(raw)/2+1))
	fast, ok, err := flatNumbers(raw, vals, n)
	if err != nil {
		return nil, err
	}
	if ok {
		return fast, nil
	}
	flat, err := flatten(raw, shape, n)
	if err != nil {
		return nil, err
	}
	if fast, ok, _ := flatNumbers(flat, vals, n); ok {
		return fast, nil
	}
	if err := json.Unmarshal(flat, &vals); err != nil {
		return nil, jsonDataError(err)
	}
	return vals, nil
}

// tooMany reports data with more elements than its shape holds.
func tooMany(n int) error {
	return fmt.Errorf("data: more elements than the %d the shape holds", n)
}

// flatNumbers parses a flat JSON array of float32, float64 or int64
// numbers with strconv alone, about five times faster than encoding/json
// on a large request's data. An element past the n the shape holds is an
// error. Anything else (nested arrays, other element types, a token that
// is not a JSON number, a value out of range) reports false, and
// encoding/json decodes it, errors included.
func flatNumbers[T any](raw []byte, vals []T, n int) ([]T, bool, error) {
	var parse func(string) (T, bool)
	switch p := any(&parse).(type) {
	case *func(string) (float32, bool):
		*p = func(s string) (float32, bool) { v, err := strconv.ParseFloat(s, 32); return float32(v), err == nil }
	case *func(string) (float64, bool):
		*p = func(s string) (float64, bool) { v, err := strconv.ParseFloat(s, 64); return v, err == nil }
	case *func(string) (int64, bool):
		*p = func(s string) (int64, bool) { v, err := strconv.ParseInt(s, 10, 64); return v, err == nil }
	default:
		return nil, false, nil
	}
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '[' {
		return nil, false, nil
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return vals, skipSpace(raw, i+1) == len(raw), nil
	}
	for {
		start := i
		for i < len(raw) && raw[i] != ',' && raw[i] != ']' && !isSpace(raw[i]) {
			i++
		}
		if i == start {
			return nil, false, nil
		}
		// A view, not a copy: strconv keeps nothing of it.
		tok := unsafe.String(&raw[start], i-start)
		if !isJSONNumber(tok) {
			return nil, false, nil
		}
		v, ok := parse(tok)
		if !ok {
			return nil, false, nil
		}
		if len(vals) == n {
			return nil, false, tooMany(n)
		}
		vals = append(vals, v)
		i = skipSpace(raw, i)
		switch {
		case i == len(raw):
			return nil, false, nil
		case raw[i] == ']':
			return vals, skipSpace(raw, i+1) == len(raw), nil
		case raw[i] != ',':
			return nil, false, nil
		}
		i = skipSpace(raw, i+1)
	}
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// isJSONNumber reports whether s is a number as JSON writes one:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? — stricter than strconv,
// which also takes "+1", ".5", "0x10", "1_000", "Inf" and "NaN".
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// flatten rewrites a JSON array of scalars (raw is valid JSON, as the
// request's decoder found it) as one flat array. It checks as it goes that
// a nested array's nesting is the shape's, every array at depth d holding
// shape[d] items and the elements all at the shape's depth, and it stops
// at the first element past n.
func flatten(raw []byte, shape []int64, n int) ([]byte, error) {
	// Room for n short numbers, not for the body: it may hold far more.
	out := append(make([]byte, 0, min(len(raw), 2+n*16)), '[')
	var open []int64 // the items seen by each array still open
	deepest, elemDepth, elems := 0, 0, 0
	nestingError := func(what string) error {
		return fmt.Errorf("data: nested arrays that are not shape %v: %s", shape, what)
	}
	for i := skipSpace(raw, 0); i < len(raw); i = skipSpace(raw, i) {
		switch c := raw[i]; c {
		case '[':
			if len(open) > 0 {
				open[len(open)-1]++
			}
			open = append(open, 0)
			deepest = max(deepest, len(open))
			switch {
			case len(open) > 1 && len(open) > len(shape):
				return nil, nestingError(fmt.Sprintf("%d deep", len(open)))
			case elemDepth != 0 && len(open) > elemDepth:
				return nil, nestingError("elements and arrays side by side")
			}
			i++
		case ']':
			if len(open) == 0 {
				return nil, errors.New("data: not an array")
			}
			d := len(open) - 1
			if deepest > 1 && open[d] != shape[d] {
				return nil, nestingError(fmt.Sprintf("an array at depth %d holds %d items, not %d", d+1, open[d], shape[d]))
			}
			open = open[:d]
			i++
		case ',':
			i++
		default:
			if len(open) == 0 {
				return nil, errors.New("data: not an array")
			}
			switch {
			case elemDepth == 0:
				elemDepth = len(open)
			case elemDepth != len(open):
				return nil, nestingError("elements at different depths")
			}
			if deepest > elemDepth {
				return nil, nestingError("elements and arrays side by side")
			}
			open[len(open)-1]++
			if elems++; elems > n {
				return nil, tooMany(n)
			}
			start := i
			i = valueEnd(raw, i)
			if elems > 1 {
				out = append(out, ',')
			}
			out = append(out, raw[start:i]...)
		}
	}
	if deepest > 1 && elemDepth != 0 && elemDepth != len(shape) {
		return nil, nestingError(fmt.Sprintf("elements %d deep", elemDepth))
	}
	return append(out, ']'), nil
}

// valueEnd returns where the JSON value that starts at raw[i] ends: a
// string or object whole (encoding/json then names what it is, where an
// element was expected), else the scalar up to the next delimiter.
func valueEnd(raw []byte, i int) int {
	depth, inString := 0, false
	for ; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
		case depth == 0 && (c == ',' || c == ']' || isSpace(c)):
			return i
		}
		if depth == 0 && !inString && (c == '"' || c == '}') {
			return i + 1
		}
	}
	return i
}

func jsonDataError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Errorf("data: a JSON %s where %s elements were expected", typeErr.Value, typeErr.Type)
	}
	return fmt.Errorf("data: %w", err)
}
