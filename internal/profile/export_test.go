package profile

// StartPoll runs the Session's /proc poll of roots' descendants alone
// (no perf), for measuring its cost; stop ends it and returns the pids
// seen.
func StartPoll(proc string, roots []int) (stop func() []int) {
	st, done := make(chan struct{}), make(chan []int, 1)
	go poll(proc, roots, st, done)
	return func() []int { close(st); return <-done }
}
