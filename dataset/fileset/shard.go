package fileset

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard selects part Index of Count of a dataset (TPUEstimator's per-host
// input): the Count shards are disjoint and together hold every row once.
type Shard struct{ Index, Count int }

// ParseShard parses "i/n" with 0 ≤ i < n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("%w: %q, want i/n such as 0/4", ErrShard, s)
	}
	sh := Shard{Index: i, Count: n}
	return sh, sh.check()
}

func (s Shard) check() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return fmt.Errorf("%w: %d/%d, want 0 ≤ i < n", ErrShard, s.Index, s.Count)
	}
	return nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// owns reports whether the shard reads unit u (a row group, a record batch,
// a chunk) of file f of files; u < 0 asks whether it reads any of file f.
// With at least as many files as shards, files are dealt whole; else each
// file's units are dealt round-robin, starting at a different shard per file.
func (s Shard) owns(files, f, u int) bool {
	n := s.Count
	switch {
	case n == 1:
		return true
	case files >= n:
		return f%n == s.Index
	}
	return u < 0 || (f+u)%n == s.Index
}

// owns reports whether the read covers unit u of file f of files: the
// shard's, within WithGroups' range.
func (c *filesConfig) owns(files, f, u int) bool {
	if u >= 0 && c.groups[1] > 0 && (u < c.groups[0] || u >= c.groups[1]) {
		return false
	}
	return c.shard.owns(files, f, u)
}
