package cliflag

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestList(t *testing.T) {
	var l List
	for _, v := range []string{"a,b", " c ", ",,d,"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(l, List{"a", "b", "c", "d"}) || l.String() != "a,b,c,d" {
		t.Errorf("list %q", l)
	}
}

func TestParse(t *testing.T) {
	if got, err := Parse("1, 2,3", strconv.Atoi); err != nil || !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("ints: %v %v", got, err)
	}
	if got, err := Parse("", time.ParseDuration); err != nil || got != nil {
		t.Errorf("empty: %v %v", got, err)
	}
	if _, err := Parse("1ms,soon", time.ParseDuration); err == nil {
		t.Error("a bad item parsed")
	}
}
