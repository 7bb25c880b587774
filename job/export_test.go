package job

import "time"

// SetCleanupGrace sets how long a cancelled run's tidying may take, and
// returns a function that restores it.
func SetCleanupGrace(d time.Duration) (restore func()) {
	was := cleanupGrace
	cleanupGrace = d
	return func() { cleanupGrace = was }
}
