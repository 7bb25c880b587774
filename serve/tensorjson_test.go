package serve

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
)

// A body of far more elements than its shape declares is refused at the
// first element past the shape, having held no more than the shape's
// worth: 20 MB of numbers declared as 4 allocate a few kilobytes.
func TestDecodeStopsAtTheShape(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 2_000_000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("1.25")
	}
	b.WriteString("]")
	raw := []byte(b.String())
	nested := bytes.Replace(raw, []byte("["), []byte("[["), 1)
	nested = append(nested, ']')
	for name, data := range map[string][]byte{"flat": raw, "nested": nested} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := decodeJSON[float32](data, []int64{1, 4}, 4)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "more elements than the 4") && !strings.Contains(err.Error(), "not shape") {
			t.Fatalf("%s: %v", name, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
			t.Errorf("%s: decoding allocated %d bytes for a %d-byte body declaring 4 elements", name, grew, len(data))
		}
	}
}

// Nested data must nest as its shape does; flat data is taken for any
// shape of its count.
func TestNestedMustMatchShape(t *testing.T) {
	for _, c := range []struct {
		data  string
		shape []int64
		want  string // "" for accepted
	}{
		{`[1,2,3,4,5,6]`, []int64{2, 3}, ""},
		{`[[1,2,3],[4,5,6]]`, []int64{2, 3}, ""},
		{`[ [ 1 , 2 , 3 ] , [ 4 , 5 , 6 ] ]`, []int64{2, 3}, ""},
		{`[[[1,2,3],[4,5,6]]]`, []int64{1, 2, 3}, ""},
		{`[[1,2],[3,4],[5,6]]`, []int64{2, 3}, "an array at depth 2 holds 2 items, not 3"},
		{`[[1,2,3],[4,5,6],[]]`, []int64{2, 3}, "an array at depth 2 holds 0 items, not 3"},
		{`[[[1,2,3,4,5,6]]]`, []int64{2, 3}, "3 deep"},
		{`[[1,2,3],4,5,6]`, []int64{2, 3}, "elements at different depths"},
		{`[1,2,3,[4,5,6]]`, []int64{2, 3}, "elements and arrays side by side"},
		{`[[1,2,3],[4,5,6],[7,8,9]]`, []int64{2, 3}, "more elements than the 6"},
		{`[[1,"a",3],[4,5,6]]`, []int64{2, 3}, "a JSON string where float32 elements were expected"},
		{`[[1,{"a":[1]},3],[4,5,6]]`, []int64{2, 3}, "a JSON object where float32 elements were expected"},
	} {
		got, err := decodeJSON[float32]([]byte(c.data), c.shape, 6)
		switch {
		case c.want == "" && (err != nil || len(got) != 6 || got[5] != 6):
			t.Errorf("%s as %v: %v, %v", c.data, c.shape, got, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s as %v: %v, want %q", c.data, c.shape, err, c.want)
		}
	}
}
