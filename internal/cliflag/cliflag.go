// Package cliflag holds the flag values the project's commands share.
package cliflag

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// List is a repeatable flag whose values may also be comma-separated.
type List []string

func (l *List) String() string { return strings.Join(*l, ",") }

// Type names the value in help (pflag's Value).
func (l *List) Type() string { return "list" }

// Set adds the comma-separated values of v.
func (l *List) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// Parse parses each item of a comma-separated list; an empty list is none.
func Parse[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Ints, Floats and Durations parse comma-separated lists.
func Ints(s string) ([]int, error) { return Parse(s, strconv.Atoi) }

func Floats(s string) ([]float64, error) {
	return Parse(s, func(f string) (float64, error) { return strconv.ParseFloat(f, 64) })
}

func Durations(s string) ([]time.Duration, error) { return Parse(s, time.ParseDuration) }

// Bytes is a flag of a number of bytes, with an optional binary suffix:
// 512MiB, 4GiB (or 512M, 4G).
type Bytes int64

func (b *Bytes) String() string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if *b > 0 && *b%(1<<u.shift) == 0 {
			return strconv.FormatInt(int64(*b)>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

// Type names the value in help (pflag's Value).
func (b *Bytes) Type() string { return "bytes" }

func (b *Bytes) Set(v string) error {
	units := []struct {
		suffix string
		shift  uint
	}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"K", 10}, {"M", 20}, {"G", 30}, {"T", 40}}
	shift := uint(0)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, shift = strings.TrimSuffix(v, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64>>shift {
		return fmt.Errorf("want a positive number of bytes, such as 4GiB")
	}
	*b = Bytes(n << shift)
	return nil
}
