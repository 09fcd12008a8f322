package pgcluster

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerFile in a cluster directory holds the PID of the process that
// started the cluster, or keptOwner once Keep handed it to the user.
const (
	ownerFile = "erplab.owner"
	keptOwner = "kept"
)

// ReapOrphans removes throwaway clusters left behind by erplab processes
// that died without stopping them (kill -9, a lost terminal before
// signals were handled): every os.TempDir()/erplab-pg-* directory whose
// owner file names a process that no longer exists. A postmaster still
// running there is shut down immediately (SIGQUIT) first. Clusters handed
// over with Keep, clusters of live processes and directories without an
// owner file are left alone. It returns the directories removed; errors
// of single directories are joined.
func ReapOrphans() ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "erplab-pg-*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || alive(owner) {
			continue // kept, or its owner is still running
		}
		if pid := postmasterPID(filepath.Join(dir, "data")); pid > 0 && alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
			for i := 0; i < 50 && alive(pid); i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// alive reports whether a process with this PID exists (kill(pid, 0)).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// postmasterPID reads the first line of postmaster.pid (storage/file
// layout: "PID of the postmaster" is line 1; see the PostgreSQL docs,
// storage-file-layout.html).
func postmasterPID(dataDir string) int {
	f, err := os.Open(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(sc.Text()))
	return pid
}
