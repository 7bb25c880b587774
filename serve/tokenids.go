package serve

import (
	"errors"
	"fmt"
	"strconv"
)

// parseTokenIDs reads OpenAI's token-id input — an array of integers, or
// an array of those — in one pass over its JSON, keeping at most keep ids
// of each row (the rest are read, checked and dropped: the model cuts a
// row there) and at most MaxEmbeddingInputs rows. What it allocates is
// bounded by rows × keep, not by the body: a 60 MiB array of ids once
// decoded into 1.5 GiB before the model cut it.
func parseTokenIDs(b []byte, keep int) ([][]int64, error) {
	p := idParser{b: b}
	p.space()
	if !p.eat('[') {
		return nil, errors.New("input is not an array")
	}
	p.space()
	if p.peek() != '[' {
		row, err := p.row(keep, -1) // one array of ids
		if err != nil {
			return nil, err
		}
		return [][]int64{row}, p.end()
	}
	var rows [][]int64
	for {
		if len(rows) == MaxEmbeddingInputs {
			return nil, fmt.Errorf("input has more than %d token arrays; a request takes %d at most", MaxEmbeddingInputs, MaxEmbeddingInputs)
		}
		p.space()
		if !p.eat('[') {
			return nil, fmt.Errorf("input %d is not an array of token ids", len(rows))
		}
		row, err := p.row(keep, len(rows))
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
		p.space()
		if p.eat(']') {
			return rows, p.end()
		}
		if !p.eat(',') {
			return nil, fmt.Errorf("input: want , or ] after token array %d", len(rows)-1)
		}
	}
}

// idParser reads JSON bytes from i on.
type idParser struct {
	b []byte
	i int
}

func (p *idParser) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *idParser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *idParser) eat(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

// end checks that nothing but space follows.
func (p *idParser) end() error {
	p.space()
	if p.i != len(p.b) {
		return errors.New("input: something follows its array")
	}
	return nil
}

// row reads the ids of an array whose [ was read, through its ], keeping
// the first keep. index names the row in errors (-1: the only one).
func (p *idParser) row(keep, index int) ([]int64, error) {
	where := "input"
	if index >= 0 {
		where = "input " + strconv.Itoa(index)
	}
	var ids []int64
	p.space()
	if p.eat(']') {
		return nil, fmt.Errorf("%s is an empty array of token ids", where)
	}
	for n := 0; ; n++ {
		p.space()
		start := p.i
		if p.peek() == '-' {
			p.i++
		}
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		// An int64 has at most 20 characters: a longer number is not
		// copied to be refused.
		id, err := int64(0), strconv.ErrRange
		if p.i-start <= 20 {
			id, err = strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
		}
		if err != nil || (p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E')) {
			return nil, fmt.Errorf("%s: token %d is not an integer id", where, n)
		}
		if n < keep {
			if ids == nil {
				ids = make([]int64, 0, min(keep, 64))
			}
			ids = append(ids, id)
		}
		p.space()
		if p.eat(']') {
			return ids, nil
		}
		if !p.eat(',') {
			return nil, fmt.Errorf("%s: want , or ] after token %d", where, n)
		}
	}
}
