package pgcluster

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/erplab/erplab/internal/hostfacts"
	"github.com/erplab/erplab/internal/leftover"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

func init() { leftover.Register(leftover.Kind{Name: reapKind, Undo: reap}) }

// reapInfo is the Data of a cluster's leftover entry: what a later
// ReapOrphans needs to prove what it finds is this cluster's.
type reapInfo struct {
	// ServerUID and ServerGID are the OS user the server runs as.
	ServerUID int `json:"server_uid"`
	ServerGID int `json:"server_gid"`
	// Postgres is the postgres binary, symlinks resolved (/proc/PID/exe).
	Postgres string `json:"postgres"`
	// DSM is dynamic_shared_memory_type ("posix" or "sysv").
	DSM string `json:"dsm,omitempty"`
	// Postmaster is the running postmaster (PID and start time).
	Postmaster leftover.Process `json:"postmaster"`
	// DataDev and DataIno identify the data directory; PostgreSQL writes
	// them in its main shared memory segment's header.
	DataDev uint64 `json:"data_dev,omitempty"`
	DataIno uint64 `json:"data_ino,omitempty"`
	// ShmKey and ShmID are the System V key and id of the main shared
	// memory segment (postmaster.pid line 7).
	ShmKey int64 `json:"shm_key,omitempty"`
	ShmID  int   `json:"shm_id,omitempty"`
}

// Waits of the reaper.
const (
	// reapStopTimeout bounds the wait for a postmaster after SIGQUIT, and
	// for its backends to detach from shared memory.
	reapStopTimeout = 5 * time.Second
	// PostgreSQL's magic numbers (src/include/storage/pg_shmem.h and
	// src/backend/storage/ipc/dsm.c).
	pgShmemMagic      = 679834894
	pgDSMControlMagic = 0x9a503d32
	// pgShmemHeaderSize is sizeof(PGShmemHeader) on 64-bit Linux.
	pgShmemHeaderSize = 56
)

// recordServer writes the running postmaster's identity and shared memory
// key into the cluster's leftover entry.
func (c *Cluster) recordServer() error {
	if c.entry == nil {
		return nil
	}
	pid := c.PID()
	p, err := leftover.ProcessOf(pid)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c.info.Postmaster = p
	if st, err := os.Stat(c.dataDir); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			c.info.DataDev, c.info.DataIno = sys.Dev, sys.Ino
		}
	}
	if lines := pidFileLines(c.dataDir); len(lines) >= 7 {
		if f := strings.Fields(lines[6]); len(f) == 2 {
			// Printed as unsigned long; the key is a 32-bit key_t.
			if v, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				c.info.ShmKey = int64(int32(uint32(v)))
			}
			c.info.ShmID, _ = strconv.Atoi(f[1])
		}
	}
	if err := c.rec.Update(c.entry, c.info); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// forget removes the cluster's entry from erplab's record.
func (c *Cluster) forget() error {
	if c.entry == nil {
		return nil
	}
	if err := c.rec.Remove(c.entry); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c.entry = nil
	return nil
}

// ReapOrphans sweeps erplab's crash-safe record (leftover.Sweep: clusters
// of erplab processes that died without Stop, and whatever other kinds
// are registered), then names the os.TempDir()/erplab-pg-* directories it
// leaves alone because no entry names them although their marker says
// they belong to a dead process (forged by another user, or left by an
// older erplab), each once (leftover.Record.FirstNotice) with the command
// that removes it. It writes one line on out when it did or refused
// anything and returns the report. See the package doc for what proves a
// directory is erplab's and which processes may be signalled.
func ReapOrphans(ctx context.Context, out io.Writer) (leftover.Report, error) {
	rec, err := leftover.Open()
	if err != nil {
		return leftover.Report{}, fmt.Errorf("pgcluster: %w", err)
	}
	entries, _ := rec.Entries()
	rep := rec.Sweep(ctx)
	// On an error FirstNotice returns every stray: they are named again
	// next time, which is all that error costs.
	dirs, _ := rec.FirstNotice(strays(entries))
	for _, d := range dirs {
		rep.LeftAlone = append(rep.LeftAlone, d+" (not in erplab's record: not touched; if it is yours and no postgres runs from it, remove it: rm -rf "+d+"; not mentioned again)")
	}
	if l := rep.Line(); l != "" && out != nil {
		fmt.Fprintln(out, l)
	}
	return rep, nil
}

// strays lists the erplab-pg-* directories in os.TempDir() (absolute
// paths) that no entry names and whose marker holds the PID of a dead
// process.
func strays(recorded []leftover.Entry) []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "erplab-pg-*"))
	var out []string
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil || slices.ContainsFunc(recorded, func(e leftover.Entry) bool { return e.Path == abs }) {
			continue
		}
		b, err := readSmall(filepath.Join(abs, ownerFile))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && !alive(pid) {
			out = append(out, abs)
		}
	}
	return out
}

// readSmall reads up to 256 bytes of a regular file without following a
// symlink.
func readSmall(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, 256))
}

// reap is the leftover Undo of a cluster directory whose erplab process
// died: prove, stop the server, remove its shared memory, remove the
// directory.
func reap(_ context.Context, e leftover.Entry) (string, error) {
	var info reapInfo
	if err := json.Unmarshal(e.Data, &info); err != nil || info.Postgres == "" || !filepath.IsAbs(e.Path) {
		return "", fmt.Errorf("unreadable entry: %w", leftover.ErrNotOurs)
	}
	dataDir := filepath.Join(e.Path, "data")
	st, err := os.Lstat(e.Path)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if exists {
		if err := provenOurs(e, st, info); err != nil {
			return "", err
		}
	}
	var did []string
	stopped, notes := stopServer(dataDir, info)
	did = append(did, stopped...)
	removed, err := removeShm(info)
	did = append(did, removed...)
	if err != nil {
		return strings.Join(did, ", "), fmt.Errorf("shared memory: %w", err)
	}
	if exists {
		if err := os.RemoveAll(e.Path); err != nil {
			return strings.Join(did, ", "), err
		}
		did = append(did, "directory removed")
	}
	if len(did) == 0 && len(notes) > 0 {
		return "", fmt.Errorf("%s: %w", strings.Join(notes, ", "), leftover.ErrNotOurs)
	}
	return strings.Join(append(did, notes...), ", "), nil
}

// provenOurs checks that st (Lstat of e.Path) is a directory owned by root
// or the effective user, mode 0700 (0710 with the server's group when the
// server runs as another user), holding a marker with e.Token.
func provenOurs(e leftover.Entry, st os.FileInfo, info reapInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok {
		return fmt.Errorf("not a directory: %w", leftover.ErrNotOurs)
	}
	if sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not by root or uid %d: %w", sys.Uid, os.Geteuid(), leftover.ErrNotOurs)
	}
	perm := st.Mode().Perm()
	if perm != 0o700 && (perm != 0o710 || int(sys.Gid) != info.ServerGID) {
		return fmt.Errorf("mode %v, not 0700: %w", perm, leftover.ErrNotOurs)
	}
	b, err := readSmall(filepath.Join(e.Path, ownerFile))
	if err != nil || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(string(b))), []byte(e.Token)) != 1 {
		return fmt.Errorf("no %s with erplab's token: %w", ownerFile, leftover.ErrNotOurs)
	}
	return nil
}

// stopServer stops the postmaster of dataDir (the one recorded, or the one
// its postmaster.pid names) with SIGQUIT, then SIGKILL, and kills server
// processes that outlived it, signalling only processes isServerOf
// approves. It returns what it did and notes on processes it refused.
func stopServer(dataDir string, info reapInfo) (did, notes []string) {
	var pids []int
	if info.Postmaster.PID > 0 && info.Postmaster.Alive() {
		pids = append(pids, info.Postmaster.PID)
	}
	if lines := pidFileLines(dataDir); len(lines) > 0 {
		if pid, err := strconv.Atoi(strings.TrimSpace(lines[0])); err == nil && pid > 0 && !slices.Contains(pids, pid) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if !isServerOf(pid, info, dataDir) {
			notes = append(notes, fmt.Sprintf("pid %d is not this cluster's postgres: not signalled", pid))
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGQUIT)
		if !waitGone(pid, reapStopTimeout) && isServerOf(pid, info, dataDir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(pid, reapStopTimeout)
		}
		did = append(did, fmt.Sprintf("postmaster %d stopped", pid))
	}
	// Backends of a postmaster killed outright exit by themselves once
	// they notice; do not wait for that.
	if rest := serverProcs(info, dataDir); len(rest) > 0 {
		for _, pid := range rest {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range rest {
			waitGone(pid, reapStopTimeout)
		}
		did = append(did, fmt.Sprintf("%d server process(es) killed", len(rest)))
	}
	return did, notes
}

// isServerOf reports whether pid runs as the server's OS user, its
// executable (/proc/PID/exe) is the recorded postgres binary and its data
// directory is dataDir: the -D argument of its command line, else its
// working directory (every server process changes to its data
// directory).
func isServerOf(pid int, info reapInfo, dataDir string) bool {
	fs, err := hostfacts.New("", "")
	if err != nil {
		return false
	}
	p, err := fs.Proc(pid)
	if err != nil {
		return false
	}
	if st, err := p.NewStatus(); err != nil || int(st.UIDs[1]) != info.ServerUID {
		return false
	}
	exe, err := p.Executable()
	if err != nil || strings.TrimSuffix(exe, " (deleted)") != info.Postgres {
		return false
	}
	cwd, _ := p.Cwd()
	cwd = strings.TrimSuffix(cwd, " (deleted)")
	want := []string{filepath.Clean(dataDir)}
	if r, err := filepath.EvalSymlinks(dataDir); err == nil {
		want = append(want, r)
	}
	if args, err := p.CmdLine(); err == nil {
		for i, a := range args {
			d, ok := "", false
			if a == "-D" && i+1 < len(args) {
				d, ok = args[i+1], true
			} else if strings.HasPrefix(a, "-D") && len(a) > 2 {
				d, ok = a[2:], true
			}
			if ok {
				if !filepath.IsAbs(d) {
					d = filepath.Join(cwd, d)
				}
				return slices.Contains(want, filepath.Clean(d))
			}
		}
	}
	return cwd != "" && slices.Contains(want, cwd)
}

// serverProcs lists the live processes isServerOf approves for dataDir.
func serverProcs(info reapInfo, dataDir string) []int {
	return pidsWhere(func(p procfs.Proc) bool { return isServerOf(p.PID, info, dataDir) })
}

// waitGone polls until pid is gone or d passes; it reports whether it is
// gone.
func waitGone(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); alive(pid); {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// alive reports whether a process with this PID exists (kill(pid, 0)).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// pidFileLines reads postmaster.pid (storage-file-layout.html: line 1 the
// postmaster's PID, line 7 the shared memory key and id).
func pidFileLines(dataDir string) []string {
	b, err := readSmall(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return nil
	}
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// removeShm removes the recorded main System V segment of a dead
// postmaster and the dynamic shared memory segments listed in its control
// segment, and says what it removed ("removed shared memory segment key
// 0x0052e2c1 id 32769", "removed dynamic shared memory
// /dev/shm/PostgreSQL.1804289383"). A segment is touched only when it is
// the recorded one: same key and id, owned by the server's uid, created by
// the recorded postmaster, with PostgreSQL's header naming that postmaster
// and data directory, and no process attached (shm_nattch 0). Anything
// else under that key belongs to another cluster and is left alone.
func removeShm(info reapInfo) ([]string, error) {
	if info.ShmKey == 0 || info.Postmaster.PID == 0 {
		return nil, nil
	}
	id, err := unix.SysvShmGet(int(int32(info.ShmKey)), 0, 0)
	if err != nil || (info.ShmID != 0 && id != info.ShmID) {
		return nil, nil // gone, or the key is another cluster's now
	}
	var ds unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds); err != nil {
		return nil, nil
	}
	if int(ds.Perm.Uid) != info.ServerUID || int(ds.Cpid) != info.Postmaster.PID {
		return nil, nil
	}
	for deadline := time.Now().Add(reapStopTimeout); ds.Nattch > 0; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("segment key %#08x id %d still attached by %d process(es)", uint32(info.ShmKey), id, ds.Nattch)
		}
		time.Sleep(50 * time.Millisecond)
		if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds); err != nil {
			return nil, nil
		}
	}
	mem, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("attach segment %d: %w", id, err)
	}
	hdr := append([]byte(nil), mem...)
	_ = unix.SysvShmDetach(mem)
	ne := binary.NativeEndian
	if len(hdr) < pgShmemHeaderSize || ne.Uint32(hdr[0:]) != pgShmemMagic || int(int32(ne.Uint32(hdr[4:]))) != info.Postmaster.PID ||
		(info.DataIno != 0 && (ne.Uint64(hdr[40:]) != info.DataDev || ne.Uint64(hdr[48:]) != info.DataIno)) {
		return nil, nil
	}
	var did []string
	var errs []error
	if control := ne.Uint32(hdr[24:]); control != 0 {
		names, err := removeDSM(info, control)
		if len(names) > 0 {
			did = append(did, "removed dynamic shared memory "+strings.Join(names, ", "))
		}
		errs = append(errs, err)
	}
	if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil {
		errs = append(errs, fmt.Errorf("remove segment %d: %w", id, err))
	} else {
		did = append([]string{fmt.Sprintf("removed shared memory segment key %#08x id %d", uint32(info.ShmKey), id)}, did...)
	}
	return did, errors.Join(errs...)
}

// removeDSM removes the dynamic shared memory control segment control and
// the live segments it lists (dsm_cleanup_using_control_segment in
// PostgreSQL's dsm.c does the same when a server restarts), each only if
// owned by the server's uid and unattached. It returns the names of those
// it removed (/dev/shm/PostgreSQL.<handle>, or "System V key <key>").
func removeDSM(info reapInfo, control uint32) ([]string, error) {
	b, err := readDSM(info, control)
	if err != nil || b == nil {
		return nil, err
	}
	ne := binary.NativeEndian
	const itemsAt = 16 // offsetof(dsm_control_header, item)
	if len(b) < itemsAt || ne.Uint32(b) != pgDSMControlMagic {
		return nil, nil
	}
	nitems, maxitems := int(ne.Uint32(b[4:])), int(ne.Uint32(b[8:]))
	if maxitems == 0 || nitems > maxitems || (len(b)-itemsAt)%maxitems != 0 || (len(b)-itemsAt)/maxitems < 8 {
		return nil, nil // not a layout we know: leave the segments alone
	}
	size := (len(b) - itemsAt) / maxitems // sizeof(dsm_control_item)
	var names []string
	var errs []error
	for i := range nitems {
		item := b[itemsAt+i*size:]
		if ne.Uint32(item[4:]) == 0 { // refcnt 0: free slot
			continue
		}
		name, err := destroyDSM(info, ne.Uint32(item))
		if name != "" {
			names = append(names, name)
		}
		errs = append(errs, err)
	}
	name, err := destroyDSM(info, control)
	if name != "" {
		names = append(names, name)
	}
	return names, errors.Join(append(errs, err)...)
}

// readDSM returns the content of dynamic shared memory segment h, nil if
// it does not exist or is not the server user's.
func readDSM(info reapInfo, h uint32) ([]byte, error) {
	if info.DSM == "sysv" {
		id, err := unix.SysvShmGet(sysvDSMKey(h), 0, 0)
		if err != nil {
			return nil, nil
		}
		var ds unix.SysvShmDesc
		if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds); err != nil || int(ds.Perm.Uid) != info.ServerUID {
			return nil, nil
		}
		mem, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
		if err != nil {
			return nil, fmt.Errorf("attach dsm %d: %w", h, err)
		}
		defer unix.SysvShmDetach(mem) //nolint:errcheck // read-only mapping
		return append([]byte(nil), mem...), nil
	}
	path := posixDSMPath(h)
	if !ownedRegular(path, info.ServerUID) {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 16<<20))
}

// destroyDSM removes dynamic shared memory segment h if it exists, is the
// server user's and (System V) has no process attached, and returns its
// name ("" when it left it).
func destroyDSM(info reapInfo, h uint32) (string, error) {
	if info.DSM == "sysv" {
		id, err := unix.SysvShmGet(sysvDSMKey(h), 0, 0)
		if err != nil {
			return "", nil
		}
		var ds unix.SysvShmDesc
		if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds); err != nil || int(ds.Perm.Uid) != info.ServerUID || ds.Nattch > 0 {
			return "", nil
		}
		if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil {
			return "", fmt.Errorf("remove dsm %d: %w", h, err)
		}
		return fmt.Sprintf("System V key %#08x", uint32(sysvDSMKey(h))), nil
	}
	path := posixDSMPath(h)
	if !ownedRegular(path, info.ServerUID) {
		return "", nil
	}
	if err := os.Remove(path); err != nil {
		return "", err
	}
	return path, nil
}

// sysvDSMKey is the System V key of dynamic shared memory segment h:
// PostgreSQL casts the handle to key_t and negates a key below 1
// (dsm_impl_sysv in dsm_impl.c).
func sysvDSMKey(h uint32) int {
	k := int32(h)
	if k < 1 {
		k = -k // wraps for -2^31 as in C
	}
	return int(k)
}

// posixDSMPath is where PostgreSQL's posix dynamic shared memory segment h
// lives (shm_open("/PostgreSQL.<h>"), dsm_impl.c).
func posixDSMPath(h uint32) string { return fmt.Sprintf("/dev/shm/PostgreSQL.%d", h) }

// ownedRegular reports whether path is a regular file (not followed if a
// symlink) owned by uid.
func ownedRegular(path string, uid int) bool {
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == uid
}
