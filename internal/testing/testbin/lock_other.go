//go:build !unix

package testbin

import "context"

// lock does not lock where flock is missing: two processes may then make
// the same thing at once, each aside, and the rename keeps one whole.
func lock(context.Context, string) (unlock func(), err error) { return func() {}, nil }
