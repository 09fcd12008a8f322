package doctor

import (
	"fmt"
	"math"
	"sort"

	"github.com/erplab/erplab/internal/sampler"
)

// With pg_wait_sampling created in the doctor's database and its library
// preloaded, the sampler reads its profile every tick (Sample.WaitProfile:
// mean sessions in each wait over the tick, from samples the server's
// collector takes every profile_period ms, 10 by default). The sampled
// wait checks then count waits from it instead of pg_stat_activity's
// instant at each tick: a lock-manager burst of 30 ms between two 500 ms
// ticks is seen. pg_wait_sampling (1.1.4) samples only waiting processes,
// so the active sessions a share is taken of still come from
// pg_stat_activity: share = mean sessions in the wait (profile) / mean
// active sessions (pg_stat_activity), both over the same window.

// addProfile adds a sample's pg_wait_sampling profile to w: the
// session-seconds in each wait over the sample's interval.
func (w *window) addProfile(s *sampler.Sample) {
	if s.WaitProfile == nil || s.Elapsed <= 0 {
		return
	}
	if w.Profile == nil {
		w.Profile = map[string]float64{}
	}
	w.ProfileSeconds = round3(w.ProfileSeconds + s.Elapsed)
	for k, v := range s.WaitProfile {
		w.Profile[k] = round3(w.Profile[k] + v*s.Elapsed)
	}
}

// profileMean is the mean number of sessions in the waits of keys over
// w's profile.
func (w window) profileMean(keys map[string]bool) float64 {
	var ss float64
	for k, v := range w.Profile {
		if keys[k] {
			ss += v
		}
	}
	return ss / max(w.ProfileSeconds, 1e-9)
}

// waitSource names where the wait figures of ws come from, for the
// evidence: pg_wait_sampling when every window has its profile.
func waitSource(ws []window, periodMs float64) string {
	if !windowsProfiled(ws) {
		return "pg_stat_activity (wait_event_type, wait_event)"
	}
	return fmt.Sprintf("pg_wait_sampling_profile (sampled every %g ms in the server; active sessions from pg_stat_activity)", periodMs)
}

// windowsProfiled reports whether every window has a pg_wait_sampling
// profile.
func windowsProfiled(ws []window) bool {
	for _, w := range ws {
		if w.ProfileSeconds <= 0 {
			return false
		}
	}
	return len(ws) > 0
}

// topProfile lists the 5 waits with most mean sessions over w's profile,
// "key 1.23".
func topProfile(w window) []string {
	var top []string
	for _, k := range keysByValue(w.Profile, 5) {
		top = append(top, fmt.Sprintf("%s %.2f", k, w.Profile[k]/max(w.ProfileSeconds, 1e-9)))
	}
	return top
}

// keysByValue returns the (at most n) keys of m with the largest values,
// largest first, ties by name.
func keysByValue[V int | float64](m map[string]V, n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys[:min(n, len(keys))]
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
