//go:build race

package cache

// raceEnabled: the race detector is on; trace tests use shorter traces.
const raceEnabled = true
