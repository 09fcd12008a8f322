package leftover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/erplab/erplab/internal/hostfacts"
)

// EnvStateDir names the environment variable that, when set, is erplab's
// state directory (tests point it at a temporary directory).
const EnvStateDir = "ERPLAB_STATE_DIR"

// ErrNotOurs is wrapped by an Undo that cannot prove the thing at an
// entry's Path is the one recorded: Sweep leaves the thing alone and drops
// the entry.
var ErrNotOurs = errors.New("cannot prove erplab created it")

// ErrByHand is wrapped by an Undo that cannot undo the entry's thing
// itself (a database on a server the sweep cannot log in to without a
// password) and says in its error how the user removes it: Sweep names it
// once in the report's "remove by hand" part and drops the entry.
var ErrByHand = errors.New("remove it by hand")

// StateDir returns erplab's state directory (see the package doc for the
// search order), creating it with mode 0700. It returns an error if it
// cannot be created or is not a directory owned by the effective user
// without group or other permissions.
func StateDir() (string, error) {
	dir := os.Getenv(EnvStateDir)
	switch {
	case dir != "":
	case os.Geteuid() == 0:
		dir = "/var/lib/erplab"
	case os.Getenv("XDG_STATE_HOME") != "":
		dir = filepath.Join(os.Getenv("XDG_STATE_HOME"), "erplab")
	default:
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("leftover: state directory: %w", err)
		}
		dir = filepath.Join(home, ".local", "state", "erplab")
	}
	if err := privateDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// privateDir creates dir (and parents) with mode 0700 and checks it is a
// real directory of the effective user with no group or other access.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("leftover: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("leftover: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok || int(sys.Uid) != os.Geteuid() || st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("leftover: %s must be a directory owned by uid %d with mode 0700 (it is %v, uid %d); fix or remove it", dir, os.Geteuid(), st.Mode(), sysUID(st))
	}
	return nil
}

func sysUID(st os.FileInfo) int {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid)
	}
	return -1
}

// Process identifies a process across PID reuse: its PID and its start
// time in clock ticks since boot (field 22 of /proc/PID/stat).
type Process struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// ProcessOf returns the Process for pid, an error if it does not exist.
func ProcessOf(pid int) (Process, error) {
	st, err := hostfacts.LiveProcStat(pid)
	if err != nil {
		return Process{}, fmt.Errorf("leftover: process %d: %w", pid, err)
	}
	return Process{PID: pid, Start: st.Starttime}, nil
}

// Alive reports whether this very process still exists: same PID and same
// start time, and not a zombie (killed, its parent not yet told: it will
// never undo anything). A zero Start only checks the PID.
func (p Process) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	st, err := hostfacts.LiveProcStat(p.PID)
	if err != nil || st.State == "Z" || st.State == "X" {
		return false
	}
	return p.Start == 0 || st.Starttime == p.Start
}

// Entry is one thing a command created. Data is the kind's own JSON.
type Entry struct {
	// ID is the entry's file name without .json: 16 random hex digits.
	ID string `json:"id"`
	// Kind names the registered Undo, e.g. "pgcluster".
	Kind string `json:"kind"`
	// Path is what was created (a directory, a mount point...).
	Path string `json:"path"`
	// Token is 32 random hex digits to write in a marker inside Path.
	Token string `json:"token"`
	// Owner is the process that created it.
	Owner Process `json:"owner"`
	// Created is when Add was called.
	Created time.Time `json:"created"`
	// Data holds the kind's facts (see Update).
	Data json.RawMessage `json:"data,omitempty"`
}

// Record is the set of entries in one directory.
type Record struct {
	dir string
	mu  sync.Mutex // serialises writes of this process
}

// Open opens the record of StateDir()/leftover, creating it.
func Open() (*Record, error) {
	state, err := StateDir()
	if err != nil {
		return nil, err
	}
	return OpenDir(filepath.Join(state, "leftover"))
}

// OpenDir opens the record kept in dir, creating it with mode 0700 (same
// checks as StateDir).
func OpenDir(dir string) (*Record, error) {
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	return &Record{dir: dir}, nil
}

// Dir is the directory holding the entries.
func (r *Record) Dir() string { return r.dir }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// Add records that this process is about to create path, with the kind's
// data (marshalled to JSON; nil for none). It returns the entry (ID, Token
// and Owner filled) once it is durably on disk.
func (r *Record) Add(kind, path string, data any) (*Entry, error) {
	self, err := ProcessOf(os.Getpid())
	if err != nil {
		return nil, err
	}
	e := &Entry{ID: randomHex(8), Kind: kind, Path: path, Token: randomHex(16), Owner: self, Created: time.Now().UTC()}
	if err := r.Update(e, data); err != nil {
		return nil, err
	}
	return e, nil
}

// Update replaces the entry's Data with data (nil keeps it) and writes the
// entry durably (temporary file, fsync, rename, fsync of the directory).
func (r *Record) Update(e *Entry, data any) error {
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("leftover: %w", err)
		}
		e.Data = b
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("leftover: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	final := filepath.Join(r.dir, e.ID+".json")
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("leftover: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("leftover: write %s: %w", final, err)
	}
	return syncDir(r.dir)
}

// Remove deletes the entry (after its thing was undone or handed over)
// durably. Removing an entry that is gone is not an error.
func (r *Record) Remove(e *Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.Remove(filepath.Join(r.dir, e.ID+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("leftover: %w", err)
	}
	return syncDir(r.dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("leftover: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("leftover: fsync %s: %w", dir, err)
	}
	return nil
}

// Entries returns every readable entry, oldest first. Unreadable or
// malformed files are skipped.
func (r *Record) Entries() ([]Entry, error) {
	names, err := filepath.Glob(filepath.Join(r.dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("leftover: %w", err)
	}
	var out []Entry
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		var e Entry
		if json.Unmarshal(b, &e) != nil || e.ID+".json" != filepath.Base(n) {
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Kind is how Sweep undoes one kind of entry.
type Kind struct {
	// Name is Entry.Kind.
	Name string
	// Undo proves the entry's thing is the one recorded, undoes it and
	// returns a few words on what it did ("" when nothing was left). It
	// returns an error wrapping ErrNotOurs when it cannot prove it (the
	// thing is left alone, the entry dropped); other errors keep the
	// entry for the next Sweep.
	Undo func(ctx context.Context, e Entry) (string, error)
}

// kinds is the registry filled by Register at init.
var (
	kindsMu sync.Mutex
	kinds   = map[string]Kind{}
)

// Register makes Sweep undo entries of k.Name. It is meant to be called
// from an init function; registering a name twice panics (a programming
// error, not user input).
func Register(k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[k.Name]; dup {
		panic("leftover: kind " + k.Name + " registered twice")
	}
	kinds[k.Name] = k
}

func registered() []Kind {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	out := make([]Kind, 0, len(kinds))
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		out = append(out, kinds[name])
	}
	return out
}

// Report is what one Sweep did, in words: "<kind> <path> (<what>)" items.
type Report struct {
	Cleaned   []string
	LeftAlone []string
	Failed    []string
	// ByHand are the things the sweep could not undo and the user
	// should (ErrByHand), each with how.
	ByHand []string
}

// Line is the report as one line ("" when there is nothing to say).
func (rep Report) Line() string {
	var parts []string
	if len(rep.Cleaned) > 0 {
		parts = append(parts, "cleaned up after killed erplab commands: "+strings.Join(rep.Cleaned, "; "))
	}
	if len(rep.Failed) > 0 {
		parts = append(parts, "could not clean up (will retry): "+strings.Join(rep.Failed, "; "))
	}
	if len(rep.ByHand) > 0 {
		parts = append(parts, "left by killed erplab commands, to remove by hand: "+strings.Join(rep.ByHand, "; "))
	}
	if len(rep.LeftAlone) > 0 {
		parts = append(parts, "left alone (erplab cannot prove it created them): "+strings.Join(rep.LeftAlone, "; "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "erplab: " + strings.Join(parts, "; ")
}

// Sweep sweeps the default record (Open) and writes the report's line, if
// any, on out. Errors opening the record are returned; errors of single
// entries are in the line.
func Sweep(ctx context.Context, out io.Writer) (Report, error) {
	r, err := Open()
	if err != nil {
		return Report{}, err
	}
	rep := r.Sweep(ctx)
	if l := rep.Line(); l != "" && out != nil {
		fmt.Fprintln(out, l)
	}
	return rep, nil
}

// Sweep undoes the entries of dead owners through their registered kinds
// (see the package doc), newest first. Entries of live owners, of unregistered kinds,
// and entries another Sweep holds are skipped.
func (r *Record) Sweep(ctx context.Context) Report {
	var rep Report
	entries, err := r.Entries()
	if err != nil {
		rep.Failed = append(rep.Failed, err.Error())
		return rep
	}
	byKind := map[string]Kind{}
	for _, k := range registered() {
		byKind[k.Name] = k
	}
	// Newest first: a thing made inside or on top of an older one (files
	// in a mounted tmpfs, a mount inside a server's directory) is undone
	// before it.
	for _, e := range slices.Backward(entries) {
		k, ok := byKind[e.Kind]
		if !ok || k.Undo == nil || e.Owner.Alive() || ctx.Err() != nil {
			continue
		}
		r.sweepOne(ctx, k, e, &rep)
	}
	return rep
}

func (r *Record) sweepOne(ctx context.Context, k Kind, e Entry, rep *Report) {
	f, err := os.Open(filepath.Join(r.dir, e.ID+".json"))
	if err != nil {
		return // removed meanwhile
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return // another Sweep has it
	}
	if _, err := os.Stat(f.Name()); err != nil {
		return // removed between Open and Flock
	}
	what, err := k.Undo(ctx, e)
	switch {
	case errors.Is(err, ErrByHand):
		rep.ByHand = append(rep.ByHand, fmt.Sprintf("%s %s (%v)", e.Kind, e.Path, err))
	case errors.Is(err, ErrNotOurs):
		rep.LeftAlone = append(rep.LeftAlone, fmt.Sprintf("%s (%v)", e.Path, err))
	case err != nil:
		rep.Failed = append(rep.Failed, fmt.Sprintf("%s %s (%v)", e.Kind, e.Path, err))
		return
	case what != "":
		rep.Cleaned = append(rep.Cleaned, fmt.Sprintf("%s %s (%s)", e.Kind, e.Path, what))
	}
	if err := r.Remove(&e); err != nil {
		rep.Failed = append(rep.Failed, err.Error())
	}
}
