// Package cliflag holds the flag values the project's commands share.
package cliflag

import (
	"fmt"
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
