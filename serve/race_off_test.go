//go:build !race

package serve

// raceEnabled: the race detector runs a test several times slower.
const raceEnabled = false
