package hostfacts

import "fmt"

// SelfCPUSeconds is the user plus system CPU time of this process so
// far, seconds (utime + stime of /proc/self/stat, proc(5)). Errors: the
// proc root has no self entry or its stat does not parse.
func (f FS) SelfCPUSeconds() (float64, error) {
	p, err := f.proc.Self()
	if err != nil {
		return 0, fmt.Errorf("own process: %w", err)
	}
	st, err := p.Stat()
	if err != nil {
		return 0, fmt.Errorf("own process stat: %w", err)
	}
	return st.CPUTime(), nil
}
