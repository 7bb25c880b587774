package serve

import (
	"bytes"
	"encoding/json"
	"strings"
)

// checkDeclaredJSON checks a REST infer request's JSON against the bounds
// before it is decoded: one scan, allocating only to read an escaped
// name, that counts the elements of the values the decoder would
// allocate for (inputs, outputs, parameters, shapes) and skips the rest
// (data, unknown names). It names what a request declares too many of.
//
// It is exact on valid JSON, names matched as the decoder matches them
// (case-folded, escapes read). Bytes that are not JSON pass, or are
// refused as over a bound: the decoder says what is wrong with those it
// is given.
func checkDeclaredJSON(b []byte) error {
	_, err := scanDeclared(b, 0, inferRequestValue)
	return err
}

// jsonRole is what a value of a REST infer request is to the bounds.
type jsonRole uint8

const (
	otherValue        jsonRole = iota // unbounded: the decoder skips it, or takes its bytes as they are
	inferRequestValue                 // the request
	parametersValue
	inputsValue
	outputsValue
	inputValue
	outputValue
	shapeValue
)

// bound returns the most elements a value of role r may hold, and what
// they are; 0 for no bound.
func (r jsonRole) bound() (int, string) {
	switch r {
	case parametersValue:
		return maxParameters, "parameters"
	case inputsValue, outputsValue:
		return maxTensors, "tensors"
	case shapeValue:
		return maxRank, "dimensions"
	}
	return 0, ""
}

// member is the role of the member named quoted (its JSON string) in an
// object of role r.
func (r jsonRole) member(quoted []byte) jsonRole {
	var names []string
	var roles []jsonRole
	switch r {
	case inferRequestValue:
		names, roles = []string{"parameters", "inputs", "outputs"}, []jsonRole{parametersValue, inputsValue, outputsValue}
	case inputValue:
		names, roles = []string{"parameters", "shape"}, []jsonRole{parametersValue, shapeValue}
	case outputValue:
		names, roles = []string{"parameters"}, []jsonRole{parametersValue}
	default:
		return otherValue
	}
	// No name of a role is longer, its every letter escaped (\uXXXX).
	if len(quoted) < 2 || len(quoted) > 2+6*len("parameters") {
		return otherValue
	}
	name := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		var s string
		if json.Unmarshal(quoted, &s) != nil {
			return otherValue
		}
		name = []byte(s)
	}
	for i, want := range names {
		// encoding/json matches a name to a field as EqualFold does.
		if strings.EqualFold(string(name), want) {
			return roles[i]
		}
	}
	return otherValue
}

// element is the role of an element of an array of role r.
func (r jsonRole) element() jsonRole {
	switch r {
	case inputsValue:
		return inputValue
	case outputsValue:
		return outputValue
	}
	return otherValue
}

// scanDeclared checks the value at b[i:] of role r and returns where it
// ends. It recurses only into values that have a role (four deep at
// most); the rest are skipped whole.
func scanDeclared(b []byte, i int, r jsonRole) (int, error) {
	i = skipSpace(b, i)
	if i == len(b) {
		return i, nil
	}
	open := b[i]
	if r == otherValue || (open != '[' && open != '{') {
		return skipValue(b, i), nil
	}
	limit, what := r.bound()
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, nil
	}
	for n := 1; ; n++ {
		if limit > 0 && n > limit {
			return i, overBound(what, limit)
		}
		role := r.element()
		if open == '{' {
			if i == len(b) || b[i] != '"' {
				return len(b), nil // not JSON
			}
			end := skipString(b, i)
			role = r.member(b[i:end])
			if i = skipSpace(b, end); i == len(b) || b[i] != ':' {
				return len(b), nil
			}
			i++
		}
		var err error
		if i, err = scanDeclared(b, i, role); err != nil {
			return i, err
		}
		switch i = skipSpace(b, i); {
		case i == len(b):
			return i, nil
		case b[i] == ',':
			i = skipSpace(b, i+1)
		case b[i] == closing:
			return i + 1, nil
		default:
			return len(b), nil
		}
	}
}

// skipString returns where the JSON string at b[i] ends (past its
// closing quote; len(b) if it does not close).
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns where the JSON value at b[i] ends: a string, an
// array or object with all it holds, or a literal.
func skipValue(b []byte, i int) int {
	if i < len(b) && b[i] == '"' {
		return skipString(b, i)
	}
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
