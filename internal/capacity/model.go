package capacity

import "time"

// KnownCapacity is the capacity, in users, of the closed system of the
// package doc's "A known answer": c pool connections, a fixed service
// time s per operation, a fixed think time z, an APDEX target time t
// (t >= s): c·(t+z)/s. Zero when s <= 0.
func KnownCapacity(c int, s, z, t time.Duration) float64 {
	if s <= 0 {
		return 0
	}
	return float64(c) * (t + z).Seconds() / s.Seconds()
}
