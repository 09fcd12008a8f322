package doctor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/erplab/erplab/internal/results"
)

// serverLogTail is how much of the end of the server log the doctor reads.
const serverLogTail = 16 << 20

// serverLog is what the doctor read in the server's log: the disk_full
// errors on temp relations and temp files of a tablespace of their own
// (the temp tablespace full), which no statistics view counts and a df
// afterwards does not show (each failure's DROP frees the space again).
type serverLog struct {
	// Path is the log file read, Bytes how much of its end; Note says why
	// no log was read ("" when one was).
	Path  string `json:"path,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	Note  string `json:"note,omitempty"`
	// DiskFull are the errors per tablespace, most first.
	DiskFull []logDiskFull `json:"disk_full,omitempty"`
}

// logDiskFull counts the log's disk-full errors on one tablespace's temp
// files.
type logDiskFull struct {
	Tablespace uint32 `json:"tablespace_oid"`
	Count      int    `json:"count"`
	// Example is the first error's message; First and Last the log line
	// prefixes (log_line_prefix: the time, with the default '%m [%p] ')
	// of the first and last error.
	Example string `json:"example"`
	First   string `json:"first,omitempty"`
	Last    string `json:"last,omitempty"`
}

// scanDiskFull reads log lines and counts the disk_full errors on temp
// relations or temp files under pg_tblspc: a line naming such a path
// (results.ParseDiskFull) that says "No space left on device", "wrote
// only" (a short write) or carries SQLSTATE 53100 (log_line_prefix %e or
// log_error_verbosity = verbose).
func scanDiskFull(r io.Reader) ([]logDiskFull, error) {
	byTS := map[uint32]*logDiskFull{}
	var order []uint32
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "No space left on device") && !strings.Contains(line, "wrote only") && !strings.Contains(line, results.CodeDiskFull) {
			continue
		}
		f, ok := results.ParseDiskFull(line)
		if !ok || !f.Temp || f.Tablespace == 0 {
			continue
		}
		prefix, msg := line, line
		if i := strings.Index(line, "ERROR:"); i >= 0 {
			prefix, msg = strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+len("ERROR:"):])
		}
		d := byTS[f.Tablespace]
		if d == nil {
			d = &logDiskFull{Tablespace: f.Tablespace, Example: msg, First: prefix}
			byTS[f.Tablespace] = d
			order = append(order, f.Tablespace)
		}
		d.Count++
		d.Last = prefix
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]logDiskFull, 0, len(order))
	for _, ts := range order {
		out = append(out, *byTS[ts])
	}
	return out, nil
}

// serverLog reads the end of the server's log (or returns the recorded
// one): pg_current_logfile() under data_directory when the logging
// collector writes it, else the postmaster's standard error when it is a
// file (pg_ctl -l, pg_ctlcluster, erplab's throwaway server). Only for a
// local server whose files this process can read.
func (e *env) serverLog(ctx context.Context) *serverLog {
	if e.rec != nil {
		if e.rec.ServerLog == nil {
			return &serverLog{Note: "not recorded"}
		}
		return e.rec.ServerLog
	}
	if e.host == nil {
		return &serverLog{Note: "the server is not on this host"}
	}
	path, shown, err := e.logPath(ctx)
	if err != nil {
		return &serverLog{Note: err.Error()}
	}
	sl := &serverLog{Path: shown}
	f, err := os.Open(path)
	if err != nil {
		return &serverLog{Note: err.Error()}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return &serverLog{Note: err.Error()}
	}
	off := max(st.Size()-serverLogTail, 0)
	sl.Bytes = st.Size() - off
	if sl.DiskFull, err = scanDiskFull(io.NewSectionReader(f, off, sl.Bytes)); err != nil {
		return &serverLog{Note: fmt.Sprintf("%s: %v", path, err)}
	}
	return sl
}

// logPath finds the server's log file: the path to open and the one to
// show (the postmaster's standard error is opened through its /proc fd
// link, which works even for a file since renamed).
func (e *env) logPath(ctx context.Context) (open, shown string, err error) {
	var cur *string
	if err := e.conn.QueryRow(ctx, `SELECT CASE WHEN pg_catalog.has_function_privilege('pg_catalog.pg_current_logfile()', 'EXECUTE') THEN pg_catalog.pg_current_logfile() END`).Scan(&cur); err == nil && cur != nil && *cur != "" {
		if filepath.IsAbs(*cur) {
			return *cur, *cur, nil
		}
		if dd := e.show("data_directory"); dd != "" {
			return filepath.Join(dd, *cur), filepath.Join(dd, *cur), nil
		}
	}
	st, err := e.host.fs.ProcStat(e.pid)
	if err != nil {
		return "", "", fmt.Errorf("the server log: %w", err)
	}
	fd := e.host.fs.ProcPath(strconv.Itoa(st.PPID), "fd", "2")
	target, err := os.Readlink(fd)
	if err != nil {
		return "", "", fmt.Errorf("the server log: %w", err)
	}
	if fi, err := os.Stat(fd); err != nil || !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("the server log: the postmaster's standard error is %s, not a file, and pg_current_logfile() names none", target)
	}
	return fd, target, nil
}

// tempFullFromLog is the temp-tablespace check's finding when the server
// log has disk_full errors on temp files of a tablespace: the temp
// tablespace is full, whatever statfs says now.
func (e *env) tempFullFromLog(ctx context.Context, facts []tsFact, ev []Evidence, m map[string]float64) (result, bool) {
	sl := e.serverLog(ctx)
	if sl.Note != "" {
		ev = append(ev, Evidence{Text: "server log not read: " + sl.Note, From: "pg_current_logfile(), the postmaster's standard error"})
	}
	if len(sl.DiskFull) == 0 {
		return result{}, false
	}
	d := sl.DiskFull[0]
	name, what := fmt.Sprintf("with OID %d", d.Tablespace), "temp tablespace"
	var fact *tsFact
	for i := range facts {
		if facts[i].OID == d.Tablespace {
			fact = &facts[i]
			name = facts[i].Name
		}
	}
	if fact != nil && fact.FSType != "" {
		what = fact.FSType + " temp tablespace"
	}
	ev = append(ev, Evidence{Text: fmt.Sprintf("server log %s (last %s): %d disk_full errors on temp files of tablespace %d, from %q to %q, first: %s",
		sl.Path, fmtBytes(sl.Bytes), d.Count, d.Tablespace, d.First, d.Last, d.Example), From: "the server log"})
	m["temp_tablespace_full_errors"] = float64(d.Count)
	now := ""
	fix := []string{}
	if fact != nil && fact.UsedPct >= 0 && fact.SizeBytes > 0 {
		now = fmt.Sprintf(" (now %.1f %% of %s used)", fact.UsedPct, fmtBytes(fact.SizeBytes))
		if fact.FSType == "tmpfs" {
			fix = append(fix, fmt.Sprintf("mount -o remount,size=%dm %s   # twice today's %s, online; then rerun the load and size it at twice its peak (df at the busiest moment)",
				2*((fact.SizeBytes+1<<20-1)>>20), fact.Mount, fmtBytes(fact.SizeBytes)))
		}
	}
	fix = append(fix, "# the trap: "+results.TempFullTrap, "# the size: "+results.TempFullSize)
	return result{sev: Critical, summary: fmt.Sprintf("the %s %s is full: the server log has %d disk_full (53100) errors on its temp tables%s: %s",
		what, name, d.Count, now, d.Example), evidence: ev, metrics: m, fix: fix}, true
}
