//go:build !unix

package job

import "errors"

// ErrLocked reports an output that a running job holds.
var ErrLocked = errors.New("job: output in use by a running job")

// lock is a no-op where flock is not available: one job per output is then
// up to the user.
type lock struct{}

func lockOutput(string) (*lock, error) { return &lock{}, nil }

func (*lock) release() {}
