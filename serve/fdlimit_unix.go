//go:build unix

package serve

import "syscall"

// fdLimit returns the process's file descriptor limit (the soft one).
func fdLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 0, false
	}
	return uint64(rl.Cur), true
}
