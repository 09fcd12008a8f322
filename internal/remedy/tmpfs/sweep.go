package tmpfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// FinishSweep completes, after a kill -9, the undo of the remedy on a
// server erplab did not start (ab --dsn), once erplab's sweep has
// unmounted its tmpfs (the newer "mount" entry) and the caller has seen
// tablespace dropped or never made: for each state file under stateDir
// (leftover.StateDir, as applyRemedy used) that records tablespace, it
// removes the tablespace directory when Apply created it (DirRecord
// Existed false) and it is empty (a directory that existed before gets
// its owner and mode back), then the state file. The run database's
// temp_tablespaces went with the database (the sweep drops it).
//
// It returns what it did in a few words ("" when no state file records
// tablespace). A directory that is not empty, or a recorded tmpfs still
// mounted, is left with its state file, named with the command that
// undoes it by hand; other errors (an unreadable state directory) are
// returned.
func FinishSweep(stateDir, tablespace string) (string, error) {
	states, err := States(Options{StateDir: stateDir})
	if err != nil {
		return "", err
	}
	var said []string
	for _, e := range states {
		st := e.State
		if st == nil || !records(st, tablespace) {
			continue
		}
		what, done := finishOne(st)
		said = append(said, what...)
		if !done {
			said = append(said, fmt.Sprintf("state file %s kept (erplab doctor fix %s --undo --state %s)", e.Path, Name, e.Path))
			continue
		}
		if err := removeState(e.Path); err != nil {
			return strings.Join(said, ", "), err
		}
		said = append(said, "removed state file "+e.Path)
	}
	return strings.Join(said, ", "), nil
}

// records reports whether st is the state of tablespace: its tablespace
// record, or, when Apply stopped before that step, its directory (named
// after the tablespace, next to the data directory).
func records(st *State, tablespace string) bool {
	if st.Tablespace != nil {
		return st.Tablespace.Name == tablespace
	}
	return st.Directory != nil && filepath.Base(st.Directory.Path) == tablespace
}

// finishOne undoes st's directory once its mount is gone; done is false
// when something is left (said names it).
func finishOne(st *State) (said []string, done bool) {
	if r := st.Mount; r != nil {
		mounts, err := readMounts("")
		if err != nil {
			return []string{err.Error()}, false
		}
		if mi := topMountAt(mounts, resolve(r.Point)); mi != nil && sameMount(mi, r) {
			return []string{r.FSType + " still mounted at " + r.Point}, false
		}
		forgetMount(r)
	}
	d := st.Directory
	if d == nil {
		return nil, true
	}
	fi, err := os.Lstat(d.Path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, true
	case err != nil:
		return []string{err.Error()}, false
	case !fi.IsDir():
		return []string{d.Path + " is not a directory: left alone"}, false
	}
	if d.Existed {
		if err := undoDirectory(d, func(string, ...any) {}); err != nil {
			return []string{err.Error()}, false
		}
		return []string{fmt.Sprintf("%s existed before: owner %d:%d and mode %04o put back", d.Path, d.PrevUID, d.PrevGID, d.PrevMode)}, true
	}
	if err := os.Remove(d.Path); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return []string{d.Path + " left: not empty"}, false
		}
		return []string{err.Error()}, false
	}
	return []string{"removed " + d.Path}, true
}
