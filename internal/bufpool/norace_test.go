//go:build !race

package bufpool

// raceEnabled: the race detector is on (it makes sync.Pool drop items).
const raceEnabled = false
