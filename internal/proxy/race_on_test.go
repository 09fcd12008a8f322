//go:build race

package proxy

// raceEnabled: under the race detector sync.Pool drops items at random,
// so allocation counts of pooled objects do not hold.
const raceEnabled = true
