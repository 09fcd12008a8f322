package results

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// CodeDiskFull is SQLSTATE 53100, disk_full: the server could not extend
// or write a file (ENOSPC).
const CodeDiskFull = "53100"

// DiskFullFile is the file a disk_full error message names, e.g.
// `could not extend file "pg_tblspc/16385/PG_15_202209061/5/t3_16389": No
// space left on device`.
type DiskFullFile struct {
	// Path is the path as quoted in the message, relative to the data
	// directory.
	Path string
	// Tablespace is the tablespace's OID for a file under pg_tblspc/, 0
	// for base/ (pg_default) and global/.
	Tablespace uint32
	// Temp reports a temporary relation's file (t<backend>_<relfilenode>,
	// its forks and segments) or a temporary file (pgsql_tmp).
	Temp bool
}

// ParseDiskFull reads the file a disk_full message names: the first
// double-quoted path under pg_tblspc/, base/ or global/. Its file name,
// not the message's wording, tells a temp relation (t3_16389) or temp
// file (pgsql_tmp) from a permanent one, so translated messages work
// too. ok is false when the message names no such file.
func ParseDiskFull(msg string) (f DiskFullFile, ok bool) {
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return f, false
	}
	j := strings.IndexByte(msg[i+1:], '"')
	if j < 0 {
		return f, false
	}
	f.Path = msg[i+1 : i+1+j]
	parts := strings.Split(f.Path, "/")
	switch {
	case len(parts) >= 4 && parts[0] == "pg_tblspc":
		oid, err := strconv.ParseUint(parts[1], 10, 32)
		if err != nil {
			return f, false
		}
		f.Tablespace = uint32(oid)
	case len(parts) >= 2 && (parts[0] == "base" || parts[0] == "global"):
	default:
		return f, false
	}
	f.Temp = strings.Contains(f.Path, "/pgsql_tmp") || tempRelFile(parts[len(parts)-1])
	return f, true
}

// tempRelFile reports whether name is a temporary relation's file:
// t<backend>_<relfilenode>, then optionally _fsm/_vm/_init and .<segment>
// (PostgreSQL's relpath for a backend-local relation).
func tempRelFile(name string) bool {
	if !strings.HasPrefix(name, "t") {
		return false
	}
	backend, rest, ok := strings.Cut(name[1:], "_")
	if !ok || !digits(backend) {
		return false
	}
	rest, _, _ = strings.Cut(rest, ".")
	rel, _, _ := strings.Cut(rest, "_")
	return digits(rel)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// TempFull is a key operation whose executions failed because a temp
// tablespace was full: disk_full on a temporary relation or file.
type TempFull struct {
	Op      string
	Failed  int64 // executions that failed with 53100 (scored)
	Count   int64 // the operation's scored executions
	File    DiskFullFile
	Example string // the server's message
}

// TempFulls returns the operations whose 53100 errors name a temporary
// relation or file in a tablespace of its own (pg_tblspc/, not the data
// directory's base/: that is the data disk full, not the temp
// tablespace), from their ErrorExamples, in the order of ops.
func TempFulls(ops []OpResult) []TempFull {
	var out []TempFull
	for _, r := range ops {
		n := r.ErrorsBySQLState[CodeDiskFull]
		msg, ok := r.ErrorExamples[CodeDiskFull]
		if n == 0 || !ok {
			continue
		}
		if f, ok := ParseDiskFull(msg); ok && f.Temp && f.Tablespace != 0 {
			out = append(out, TempFull{Op: r.Name, Failed: n, Count: r.Count, File: f, Example: msg})
		}
	}
	return out
}

// TempFullTrap is the field's trap of a full temp tablespace.
const TempFullTrap = "only DROP TABLE frees its space: once it is full, INSERT into a temp table fails and so does TRUNCATE " +
	"(it writes new files and rebuilds the indexes); the application's DROP after each failure empties it again, " +
	"so df and a one-off check look fine afterwards"

// TempFullSize says how to size the temp tablespace: twice the peak use
// of a run without 53100 (the peak, not the mean: tmpfs takes RAM only as
// it fills, so the size is a cap, not a reservation); a run that hit the
// cap does not show its peak, so the size is doubled until none fails.
const TempFullSize = "size it at twice the peak use of a run without 53100 (df <mount> at the busiest moment, or " +
	"erplab doctor's temp-tablespace check during the load): this run hit the cap, so its peak is unknown: " +
	"double the size (tmpfs grows online: mount -o remount,size=<2 x now> <mount>) and rerun until no 53100 is left; " +
	"tmpfs takes RAM only as it fills, count the peak in the memory budget"

// Line is the summary's finding, e.g. `temp tablespace full:
// temp_table_storm failed 1739 of 1740 times with 53100 disk_full on a
// temp table's file (could not extend file "pg_tblspc/16385/...": No space
// left on device): the temp tablespace pg_tblspc/16385 (tmpfs when erplab's
// remedy made it) is full`.
func (t TempFull) Line() string {
	what := "a temp table's file"
	if strings.Contains(t.File.Path, "pgsql_tmp") {
		what = "a temporary file"
	}
	return fmt.Sprintf("temp tablespace full: %s failed %d of %d times with 53100 disk_full on %s (%s): "+
		"the temp tablespace pg_tblspc/%d (a tmpfs when erplab's tmpfs remedy made it) is full",
		t.Op, t.Failed, t.Count, what, t.Example, t.File.Tablespace)
}

// SortTempFulls orders findings by failures, most first.
func SortTempFulls(ts []TempFull) {
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Failed > ts[j].Failed })
}
