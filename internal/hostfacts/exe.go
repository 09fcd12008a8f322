package hostfacts

import "fmt"

// Executable is the path of the program process pid runs
// (/proc/<pid>/exe, proc(5)), e.g. a postmaster's
// /usr/lib/postgresql/15/bin/postgres, whose pg_ctl is beside it. Errors:
// no such process, or not ours to read (another user's, as non-root).
func (f FS) Executable(pid int) (string, error) {
	p, err := f.proc.Proc(pid)
	if err != nil {
		return "", fmt.Errorf("process %d: %w", pid, err)
	}
	exe, err := p.Executable()
	if err != nil {
		return "", fmt.Errorf("process %d: executable: %w", pid, err)
	}
	return exe, nil
}
