//go:build !linux

package engine

import "time"

// nanosleep sleeps d with a Go timer where nanosleep(2) is not used
// (precise to the platform's timer resolution only).
func nanosleep(d time.Duration) { time.Sleep(d) }
