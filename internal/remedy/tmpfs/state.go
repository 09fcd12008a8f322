package tmpfs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StateVersion is the format version of a state file (State.Version).
const StateVersion = 1

// State is what one Apply created and changed on one server, for one
// tablespace: the state file's content (JSON, format in doc.go). A step's
// record is written before the step runs (Done false) and again once it
// has run (Done true); a nil record means the step was never reached.
type State struct {
	Version int `json:"version"`
	// SystemIdentifier is pg_control_system().system_identifier (decimal
	// text: it does not fit JSON's float64), DataDir data_directory:
	// together they name the server.
	SystemIdentifier string `json:"system_identifier"`
	DataDir          string `json:"data_directory"`
	// Database and DBOID are the database Apply ran in.
	Database string `json:"database"`
	DBOID    uint32 `json:"database_oid"`
	// Created and Updated are RFC 3339 UTC times.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Size and Scope are the options of the Apply.
	Size  string `json:"size"`
	Scope Scope  `json:"scope"`

	Directory  *DirRecord        `json:"directory,omitempty"`
	Tablespace *TablespaceRecord `json:"tablespace,omitempty"`
	Grant      *GrantRecord      `json:"grant,omitempty"`
	Mount      *MountRecord      `json:"mount,omitempty"`
	Setting    *SettingRecord    `json:"setting,omitempty"`
	// Complete is set when every step ran and the verification passed.
	Complete bool `json:"complete"`
}

// DirRecord is step 1: the tablespace directory.
type DirRecord struct {
	Path string `json:"path"`
	// Existed: the directory was there (empty) before; then PrevUID,
	// PrevGID and PrevMode (permission bits) are what Apply changed and
	// what undo puts back, and undo does not remove it.
	Existed  bool        `json:"existed"`
	PrevUID  int         `json:"prev_uid,omitempty"`
	PrevGID  int         `json:"prev_gid,omitempty"`
	PrevMode os.FileMode `json:"prev_mode,omitempty"`
	Done     bool        `json:"done"`
}

// TablespaceRecord is step 2: the tablespace Apply created.
type TablespaceRecord struct {
	Name     string `json:"name"`
	Location string `json:"location"`
	// OID is pg_tablespace.oid once created (0 while only intended).
	OID  uint32 `json:"oid,omitempty"`
	Done bool   `json:"done"`
}

// GrantRecord is the grant of step 2 (it goes with DROP TABLESPACE); nil
// when Options.GrantTo was empty.
type GrantRecord struct {
	Privilege string `json:"privilege"` // "CREATE"
	To        string `json:"to"`        // the grantees as in the GRANT: "PUBLIC", "\"erp\", \"report\""
	Done      bool   `json:"done"`
}

// MountRecord is step 4: the tmpfs Apply mounted.
type MountRecord struct {
	Point   string `json:"point"`
	FSType  string `json:"fs_type"` // "tmpfs"
	Size    string `json:"size"`    // as given, e.g. "64M"
	Options string `json:"options"` // mount data, e.g. "size=64M,uid=..."
	// MountID and Device are the mount's ID and st_dev (major:minor) in
	// /proc/self/mountinfo once mounted: undo unmounts only a mount with
	// both.
	MountID int    `json:"mount_id,omitempty"`
	Device  string `json:"device,omitempty"`
	// Mounted: erplab mounted it (set with Done).
	Mounted bool `json:"mounted"`
	// LeftoverID is the ID of the mount's entry in erplab's crash-safe
	// record (package leftover) when the mount is recorded there (the ab
	// remedy); undo removes that entry with the mount.
	LeftoverID string `json:"leftover_id,omitempty"`
	Done       bool   `json:"done"`
}

// SettingRecord is step 5: temp_tablespaces at Scope.
type SettingRecord struct {
	Scope Scope `json:"scope"`
	// Database is the database of ScopeDatabase.
	Database string `json:"database,omitempty"`
	// WasSet: temp_tablespaces was set at that scope before (in
	// postgresql.auto.conf for system, pg_db_role_setting for the
	// database); Previous is that value. Undo sets it back, or RESETs
	// when it was not set.
	WasSet   bool   `json:"was_set"`
	Previous string `json:"previous"`
	// Value is what Apply set: the tablespace, the only entry.
	Value string `json:"value"`
	Done  bool   `json:"done"`
}

// StateDir returns erplab's state directory: /var/lib/erplab for root,
// else $XDG_STATE_HOME/erplab ($HOME/.local/state/erplab when unset).
// Errors: no home directory.
func StateDir() (string, error) {
	if os.Geteuid() == 0 {
		return "/var/lib/erplab", nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "erplab"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("tmpfs fix: state directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "erplab"), nil
}

// stateSubdir is the directory of this package's state files under the
// state directory.
const stateSubdir = "tmpfs"

// stateFiles returns the directory holding the state files for opts
// (<StateDir or opts.StateDir>/tmpfs).
func stateFiles(opts Options) (string, error) {
	d := opts.StateDir
	if d == "" {
		var err error
		if d, err = StateDir(); err != nil {
			return "", err
		}
	}
	return filepath.Join(d, stateSubdir), nil
}

// ensurePrivateDir creates dir and its parent with mode 0700 when
// missing, and checks that both are real directories owned by this
// process's user that no one else can write. Errors name the path.
func ensurePrivateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(filepath.Dir(dir)), 0o755); err != nil {
		return fmt.Errorf("tmpfs fix: state directory: %w", err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("tmpfs fix: state directory: %w", err)
		}
		st, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("tmpfs fix: state directory: %w", err)
		}
		sys, _ := st.Sys().(*syscall.Stat_t)
		switch {
		case !st.IsDir():
			return fmt.Errorf("tmpfs fix: state directory %s is not a directory", d)
		case sys == nil || int(sys.Uid) != os.Geteuid():
			return fmt.Errorf("tmpfs fix: state directory %s is not owned by uid %d", d, os.Geteuid())
		case st.Mode().Perm()&0o077 != 0:
			if err := os.Chmod(d, 0o700); err != nil {
				return fmt.Errorf("tmpfs fix: state directory: %w", err)
			}
		}
	}
	return nil
}

// StatePath returns the state file for the server (system identifier,
// data directory) and tablespace under opts.StateDir (default StateDir):
// <dir>/tmpfs/<sysid>-<tablespace, safe characters>-<hash>.json, where
// hash is the first 12 hex digits of SHA-256 over data directory, NUL,
// tablespace.
func StatePath(opts Options, sysid, dataDir, tablespace string) (string, error) {
	dir, err := stateFiles(opts)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(dataDir + "\x00" + tablespace))
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, tablespace)
	if len(safe) > 40 {
		safe = safe[:40]
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%s-%s.json", sysid, safe, hex.EncodeToString(h[:6]))), nil
}

// LoadState reads a state file. Errors: the file missing (wrapping
// os.ErrNotExist), unreadable, not a state file of a known version.
func LoadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tmpfs fix: state file: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("tmpfs fix: state file %s: %w", path, err)
	}
	if s.Version != StateVersion || s.SystemIdentifier == "" || s.DataDir == "" || s.Tablespace == nil && s.Directory == nil {
		return nil, fmt.Errorf("tmpfs fix: %s is not a state file of version %d", path, StateVersion)
	}
	return &s, nil
}

// save writes s to path crash-safely: a 0600 temporary file in the same
// directory, fsync, rename over path, fsync of the directory. After a
// crash path holds either the old or the new state, never a torn one.
func (s *State) save(path string) error {
	if err := ensurePrivateDir(filepath.Dir(path)); err != nil {
		return err
	}
	s.Updated = time.Now().UTC().Truncate(time.Second)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("tmpfs fix: state file: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("tmpfs fix: state file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("tmpfs fix: write state file %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// removeState removes the state file once everything it records is
// undone, and syncs its directory.
func removeState(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tmpfs fix: remove state file: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("tmpfs fix: state file: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("tmpfs fix: sync %s: %w", dir, err)
	}
	return nil
}

// StateEntry is one state file found by States.
type StateEntry struct {
	Path  string
	State *State // nil when Err is set
	Err   error
}

// States lists the state files under opts.StateDir (default StateDir),
// sorted by path; unreadable files come with Err. No directory means
// none.
func States(opts Options) ([]StateEntry, error) {
	dir, err := stateFiles(opts)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("tmpfs fix: %w", err)
	}
	var out []StateEntry
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		s, err := LoadState(p)
		out = append(out, StateEntry{Path: p, State: s, Err: err})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Summary is one line saying what the state records, e.g. "server
// 7312... /var/lib/postgresql/15/main, tablespace erplab_temp_tmpfs (oid
// 16390), tmpfs 2G at ..., temp_tablespaces at system scope (was unset),
// complete".
func (s *State) Summary() string {
	var parts []string
	parts = append(parts, "server "+s.SystemIdentifier+" "+s.DataDir)
	if t := s.Tablespace; t != nil {
		p := "tablespace " + t.Name
		if t.OID != 0 {
			p += " (oid " + strconv.FormatUint(uint64(t.OID), 10) + ")"
		}
		parts = append(parts, p+" at "+t.Location)
	} else if d := s.Directory; d != nil {
		parts = append(parts, "directory "+d.Path)
	}
	if m := s.Mount; m != nil {
		parts = append(parts, fmt.Sprintf("%s %s at %s%s", m.FSType, m.Size, m.Point, pending(m.Done)))
	}
	if st := s.Setting; st != nil {
		was := "unset"
		if st.WasSet {
			was = "'" + st.Previous + "'"
		}
		parts = append(parts, fmt.Sprintf("temp_tablespaces at %s scope (was %s)%s", st.Scope, was, pending(st.Done)))
	}
	if s.Complete {
		parts = append(parts, "complete")
	} else {
		parts = append(parts, "incomplete (an apply stopped or undo is half done)")
	}
	return strings.Join(parts, ", ")
}

func pending(done bool) string {
	if done {
		return ""
	}
	return " (intended, maybe not done)"
}

// journaled reports whether the journal holds the record of step name
// (intended or done): the steps of procedure() with a record of their own.
func (s *State) journaled(name string) bool {
	switch name {
	case "directory":
		return s.Directory != nil
	case "tablespace":
		return s.Tablespace != nil
	case "grant":
		return s.Grant != nil
	case "mount":
		return s.Mount != nil
	case "setting":
		return s.Setting != nil
	}
	return false
}

// forget drops the record of step name once its undo has run.
func (s *State) forget(name string) {
	switch name {
	case "directory":
		s.Directory = nil
	case "tablespace":
		s.Tablespace = nil
	case "grant":
		s.Grant = nil
	case "mount":
		s.Mount = nil
	case "setting":
		s.Setting = nil
	}
}

// empty reports whether no step is journaled.
func (s *State) empty() bool {
	return s.Directory == nil && s.Tablespace == nil && s.Grant == nil && s.Mount == nil && s.Setting == nil
}
