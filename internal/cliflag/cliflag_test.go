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

func TestBytes(t *testing.T) {
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512M": 512 << 20, "12": 12, "1KiB": 1024, "3T": 3 << 40} {
		var b Bytes
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	var b Bytes
	b.Set("64MiB")
	if b.String() != "64MiB" {
		t.Errorf("String() = %q, want 64MiB", b.String())
	}
	for _, in := range []string{"0", "-1", "x", "1.5GiB", "9999999999TiB", "GiB"} {
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) took it as %d", in, b)
		}
	}
}
