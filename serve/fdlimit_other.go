//go:build !unix

package serve

// fdLimit knows no file descriptor limit here.
func fdLimit() (uint64, bool) { return 0, false }
