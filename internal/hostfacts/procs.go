package hostfacts

import (
	"fmt"

	"github.com/prometheus/procfs"
)

// Mounts parses <proc>/self/mountinfo (proc(5)): the mount table of this
// process's mount namespace, in mount order. Errors name the file.
func (f FS) Mounts() ([]*procfs.MountInfo, error) {
	m, err := f.proc.GetMounts()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.ProcPath("self", "mountinfo"), err)
	}
	return m, nil
}

// LiveMounts is Mounts of this host (DefaultProcRoot).
func LiveMounts() ([]*procfs.MountInfo, error) {
	f, err := New("", "")
	if err != nil {
		return nil, err
	}
	return f.Mounts()
}

// Proc returns process pid under the proc root (procfs; its files are
// read by its methods). A process that does not exist is an error
// (procfs's, unwrapped).
func (f FS) Proc(pid int) (procfs.Proc, error) {
	return f.proc.Proc(pid)
}

// AllProcs lists every process under the proc root. Errors: the proc
// root cannot be listed (procfs's, unwrapped).
func (f FS) AllProcs() (procfs.Procs, error) {
	return f.proc.AllProcs()
}

// AllThreads lists the threads of process pid (<proc>/<pid>/task).
// Errors: procfs's, unwrapped.
func (f FS) AllThreads(pid int) (procfs.Procs, error) {
	return f.proc.AllThreads(pid)
}
