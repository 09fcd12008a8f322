// Package techlog reads the 1C:Enterprise technological journal into
// capture events (source "techlog" of docs/capture-format.md), and
// writes that journal from capture events (Writer), for tests.
//
// The journal, as logcfg.xml writes it in the text format: folders
// rphost_<pid>/ holding one file per hour, YYMMDDHH.log (the file name
// gives the date and hour), UTF-8 with a byte-order mark. Each event
// starts a line
//
//	mm:ss.uuuuuu-<duration µs>,<EVENT>,<level>,name=value,name=value,...
//
// where the time is when the event ENDED (1C logs at completion), so it
// started duration µs earlier. A value is bare (up to the next comma or
// the line end) or quoted in '...' or "..." (a quote inside doubled),
// and a quoted value may span lines. Only DBPOSTGRS events become
// statements: Sql (with $n), Prm ("p_<n>: <literal>::<type>" one per
// line), dbpid, Trans, t:connectID, SessionID, Usr, Context,
// RowsAffected, Result (libpq's status, PGRES_TUPLES_OK...). Every other
// event (CALL, TLOCK, TDEADLOCK, ...) is counted by name and skipped.
//
// The mapping: a session per t:connectID (else "s"+SessionID, else
// "p"+dbpid), opened by a KindConnect at its first statement (user from
// Usr, application_name "1C", no database: replay's --dsn gives it) and
// closed by a KindDisconnect when its last statement ended (the journal
// does not log disconnections). A statement with parameters is a
// KindExecute of the unnamed statement (SQL, TypeNames after the type
// map, Values in text format), one without a KindQuery; BEGIN, COMMIT
// and ROLLBACK are queries like any other. Duration, Rows
// (RowsAffected, -1 when absent), SQLState (from Result), TxAfter (the
// statement's own effect for transaction control, else Trans),
// Operation (the first line of Context) and Where (file:line) come with
// it. The events of all files are merged into one stream by start time.
package techlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/capture"
)

// Options control Open.
type Options struct {
	// TypeMap overrides DefaultTypeMap entry by entry ("mvarchar":
	// "text"); an empty target keeps that type unmapped.
	TypeMap map[string]string
	// Logcfg is the logcfg.xml the journal was written with (optional):
	// its duration filters on DBPOSTGRS set Header.Partial.
	Logcfg string
	// Partial, when not empty, says why the journal holds only some
	// statements; it becomes Header.Partial, over Logcfg and the
	// heuristic (Summary.Partial).
	Partial string
	// Location is the zone of the journal's times (the 1C server's
	// local time); nil is UTC.
	Location *time.Location
	// MaxErrors caps Summary.Errors (0: 100); BadLines counts all.
	MaxErrors int
}

// Summary is what Open found. Counts are of events unless named.
type Summary struct {
	Files      int            // journal files read
	Lines      int            // physical lines read
	Records    int            // events read whole, every name
	Statements int            // DBPOSTGRS events that became statements
	Queries    int            // of them without parameters: KindQuery
	Executes   int            // with Prm: KindExecute
	Sessions   int            // sessions (KindConnect events)
	Failed     int            // statements whose Result is an error
	NoSQLState int            // of them without a SQLSTATE (UnknownSQLState)
	Other      map[string]int // events skipped, by name
	BadLines   int            // physical lines skipped as bad input
	Errors     []*LineError   // the first MaxErrors bad places, one per bad record or run of lines
	Types      []TypeMapping  // each type the map changed, once
	Partial    string         // Header.Partial, "" for a whole journal
	Logcfg     string         // what logcfg.xml said, when it selects no DBPOSTGRS
}

// Journal is a journal read once (Open): its header and summary are
// known, and Emit streams its events.
type Journal struct {
	opts    Options
	loc     *time.Location
	files   []jfile
	index   []entry
	sess    []session
	byKey   map[string]int32
	types   *typeMap
	sum     Summary
	started int64
	minDur  int64
	dbs     map[string]bool
	header  capture.Header
}

// session is one session's key, user, backend pid, first start and
// last end (µs since the epoch).
type session struct {
	key         string
	user        string
	pid         int32
	first, last int64
}

// entry places one event of the merged stream: a statement's record
// (file, first line, byte offset and size) or a session's end.
type entry struct {
	t    int64
	off  int64
	file int32
	line int32
	size int32
	sess int32
	end  bool
}

// Open reads the journal under paths (see findFiles) once: it checks
// every record, counts, and orders the statements by start time. Bad
// input is not an error (Summary.Errors); an unreadable path, a
// logcfg.xml that does not parse or a cancelled ctx is.
func Open(ctx context.Context, paths []string, opts Options) (*Journal, error) {
	loc := opts.Location
	if loc == nil {
		loc = time.UTC
	}
	if opts.MaxErrors <= 0 {
		opts.MaxErrors = 100
	}
	files, err := findFiles(paths, loc)
	if err != nil {
		return nil, err
	}
	j := &Journal{opts: opts, loc: loc, files: files, byKey: map[string]int32{}, types: newTypeMap(opts.TypeMap),
		sum: Summary{Other: map[string]int{}}, started: -1, minDur: -1, dbs: map[string]bool{}}
	for fi := range files {
		if err := j.scanFile(ctx, fi); err != nil {
			return nil, err
		}
	}
	if err := j.finish(paths); err != nil {
		return nil, err
	}
	return j, nil
}

// Header is the capture header of the journal: Started is the start of
// its first statement.
func (j *Journal) Header() capture.Header { return j.header }

// Summary is what Open found.
func (j *Journal) Summary() *Summary { return &j.sum }

// Read is Open, then header(j.Header()), then Emit.
func Read(ctx context.Context, paths []string, opts Options, header func(capture.Header) error, emit func(capture.Event) error) (*Summary, error) {
	j, err := Open(ctx, paths, opts)
	if err != nil {
		return nil, err
	}
	if err := header(j.Header()); err != nil {
		return j.Summary(), err
	}
	return j.Summary(), j.Emit(ctx, emit)
}

// scanFile reads file fi: every record is checked and each statement
// put in the index; bad lines are reported and skipped.
func (j *Journal) scanFile(ctx context.Context, fi int) error {
	f, err := os.Open(j.files[fi].path)
	if err != nil {
		return err
	}
	defer f.Close()
	j.sum.Files++
	lr := newLineReader(f)
	skipping := false
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		l, ok, err := lr.next()
		if err != nil {
			return fmt.Errorf("%s: %w", j.files[fi].path, err)
		}
		if !ok {
			break
		}
		if !isHeader(l.text) {
			if !skipping {
				j.bad(fi, l, 0, notEvent(l.text))
			}
			j.sum.BadLines++
			skipping = true
			continue
		}
		skipping = false
		rec, pe, err := parseRecord(l, lr)
		if err != nil {
			return fmt.Errorf("%s: %w", j.files[fi].path, err)
		}
		if last := rec.lines[len(rec.lines)-1]; pe == nil && !last.nl {
			pe = &posErr{len(rec.lines) - 1, len(last.text), "the file ends inside this event (no line end): a torn last record"}
		}
		if pe != nil {
			j.bad(fi, rec.lines[pe.li], pe.bi, pe.msg)
			lr.push(rec.lines[1:])
			j.sum.BadLines++
			skipping = true
			continue
		}
		j.add(fi, rec)
	}
	j.sum.Lines += lr.num
	return nil
}

// notEvent is the message for a line that does not start an event.
func notEvent(s string) string {
	if strings.HasPrefix(s, "{") {
		return "a JSON line: only the text format of the journal is read (logcfg.xml <log format=\"json\">)"
	}
	return "not the start of an event (mm:ss.uuuuuu-duration,EVENT,level,...)"
}

// bad records one bad place: byte bi of line l of file fi.
func (j *Journal) bad(fi int, l rawLine, bi int, msg string) {
	if len(j.sum.Errors) < j.opts.MaxErrors {
		j.sum.Errors = append(j.sum.Errors, &LineError{File: j.files[fi].where, Line: l.num, Column: l.col(bi), Msg: msg})
	}
}

// add counts a record that parsed and indexes it when it is a statement.
func (j *Journal) add(fi int, rec *record) {
	if rec.name != "DBPOSTGRS" {
		j.sum.Records++
		j.sum.Other[rec.name]++
		return
	}
	st, ok, pe := interpret(rec, j.files[fi].hour)
	if pe != nil {
		j.bad(fi, rec.lines[pe.li], pe.bi, pe.msg)
		j.sum.BadLines += len(rec.lines)
		return
	}
	j.sum.Records++
	if !ok {
		j.sum.Other["DBPOSTGRS without Sql"]++
		return
	}
	for _, p := range st.params {
		if p.typ != "" {
			j.types.apply(p.typ, true)
		}
	}
	j.count(st)
	first, last := rec.lines[0], rec.lines[len(rec.lines)-1]
	j.index = append(j.index, entry{t: st.start, off: first.off, file: int32(fi), line: int32(first.num),
		size: int32(last.off + int64(last.size) - first.off), sess: j.session(st)})
}

// count adds a statement to the summary and the header's facts.
func (j *Journal) count(st statement) {
	j.sum.Statements++
	if len(st.params) > 0 {
		j.sum.Executes++
	} else {
		j.sum.Queries++
	}
	if st.sqlState != "" {
		j.sum.Failed++
	}
	if st.sqlState == UnknownSQLState {
		j.sum.NoSQLState++
	}
	if j.started < 0 || st.start < j.started {
		j.started = st.start
	}
	if j.minDur < 0 || st.dur < j.minDur {
		j.minDur = st.dur
	}
	if st.database != "" {
		j.dbs[st.database] = true
	}
}

// session returns the index of st's session, creating it.
func (j *Journal) session(st statement) int32 {
	i, ok := j.byKey[st.session]
	if !ok {
		i = int32(len(j.sess))
		j.byKey[st.session] = i
		j.sess = append(j.sess, session{key: st.session, first: st.start, last: st.start + st.dur})
	}
	s := &j.sess[i]
	if s.user == "" {
		s.user = st.user
	}
	if s.pid == 0 {
		s.pid = st.pid
	}
	s.first, s.last = min(s.first, st.start), max(s.last, st.start+st.dur)
	return i
}

// finish adds the sessions' ends, sorts the stream and builds the
// header.
func (j *Journal) finish(paths []string) error {
	for i, s := range j.sess {
		j.index = append(j.index, entry{t: s.last, sess: int32(i), end: true})
	}
	sort.Slice(j.index, func(a, b int) bool { return j.index[a].less(j.index[b]) })
	j.sum.Sessions = len(j.sess)
	j.sum.Types = j.types.mappings()
	if j.started < 0 && len(j.files) > 0 {
		j.started = j.files[0].hour
	}
	if err := j.partial(paths); err != nil {
		return err
	}
	j.header = capture.Header{Type: "header", Format: capture.Format, Schema: capture.Schema,
		Source: capture.SourceTechLog, Started: time.UnixMicro(j.started).In(j.loc),
		Origin: j.origin(paths), Partial: j.sum.Partial}
	return nil
}

// less orders the stream: by time; at one time statements before
// sessions' ends; then by file and line.
func (e entry) less(o entry) bool {
	switch {
	case e.t != o.t:
		return e.t < o.t
	case e.end != o.end:
		return !e.end
	case e.file != o.file:
		return e.file < o.file
	}
	return e.line < o.line
}

// origin describes the input for Header.Origin.
func (j *Journal) origin(paths []string) map[string]string {
	o := map[string]string{"paths": strings.Join(paths, ", "), "files": strconv.Itoa(len(j.files)),
		"format": "1C technological journal (text), DBPOSTGRS", "zone": j.loc.String()}
	if j.opts.Logcfg != "" {
		o["logcfg"] = j.opts.Logcfg
	}
	var dbs []string
	for d := range j.dbs {
		dbs = append(dbs, d)
	}
	if len(dbs) > 0 {
		sort.Strings(dbs)
		o["database"] = strings.Join(dbs, ", ")
	}
	return o
}

// Emit streams the journal's events in order: each session's
// KindConnect just before its first statement, the statements, each
// session's KindDisconnect when its last statement ended. It stops at
// emit's first error, returned as it is.
func (j *Journal) Emit(ctx context.Context, emit func(capture.Event) error) error {
	files := &fileCache{files: j.files, open: map[int32]*os.File{}}
	defer files.close()
	tx := &txClass{seen: map[string]byte{}}
	opened := make([]bool, len(j.sess))
	for n, e := range j.index {
		if n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		s := j.sess[e.sess]
		if e.end {
			if err := emit(capture.Event{Kind: capture.KindDisconnect, Session: s.key, T: e.t - j.started}); err != nil {
				return err
			}
			continue
		}
		st, err := j.reread(files, e)
		if err != nil {
			return err
		}
		if !opened[e.sess] {
			opened[e.sess] = true
			if err := emit(j.connect(s, e)); err != nil {
				return err
			}
		}
		if err := emit(j.event(st, e, tx)); err != nil {
			return err
		}
	}
	return nil
}

// connect is session s's KindConnect, at its first statement e.
func (j *Journal) connect(s session, e entry) capture.Event {
	params := map[string]string{"application_name": "1C"}
	if s.user != "" {
		params["user"] = s.user
	}
	return capture.Event{Kind: capture.KindConnect, Session: s.key, T: e.t - j.started, Params: params,
		BackendPID: s.pid, Where: j.where(e)}
}

// where is "file:line" of entry e.
func (j *Journal) where(e entry) string {
	return j.files[e.file].where + ":" + strconv.Itoa(int(e.line))
}

// event is the capture event of statement st at entry e.
func (j *Journal) event(st statement, e entry, tx *txClass) capture.Event {
	ev := capture.Event{Kind: capture.KindQuery, Session: j.sess[e.sess].key, T: st.start - j.started,
		SQL: st.sql, Duration: st.dur, Rows: st.rows, SQLState: st.sqlState, Operation: st.operation,
		TxAfter: txAfter(tx.effect(st.sql), st.trans, st.sqlState != ""), Where: j.where(e)}
	if len(st.params) == 0 {
		return ev
	}
	ev.Kind = capture.KindExecute
	ev.TypeNames = make([]string, len(st.params))
	ev.Values = make([][]byte, len(st.params))
	for i, p := range st.params {
		if p.typ != "" {
			ev.TypeNames[i] = j.types.apply(p.typ, false)
		}
		ev.Values[i] = p.value
	}
	return ev
}

// errChanged is a record that no longer reads as it did in Open.
var errChanged = errors.New("the journal file changed since it was opened")

// reread reads entry e's record again and interprets it.
func (j *Journal) reread(files *fileCache, e entry) (statement, error) {
	f, err := files.get(e.file)
	if err != nil {
		return statement{}, err
	}
	buf := make([]byte, e.size)
	if _, err := f.ReadAt(buf, e.off); err != nil {
		return statement{}, fmt.Errorf("%s: %w", j.where(e), err)
	}
	lr := bytesLineReader(buf, int(e.line), e.off)
	l, _, _ := lr.next()
	rec, pe, err := parseRecord(l, lr)
	if err != nil || pe != nil {
		return statement{}, fmt.Errorf("%s: %w", j.where(e), errChanged)
	}
	st, ok, pe := interpret(rec, j.files[e.file].hour)
	if !ok || pe != nil {
		return statement{}, fmt.Errorf("%s: %w", j.where(e), errChanged)
	}
	return st, nil
}

// fileCache keeps journal files open for Emit's reads, at most
// maxOpen at a time.
type fileCache struct {
	files []jfile
	open  map[int32]*os.File
}

const maxOpen = 64

func (c *fileCache) get(i int32) (*os.File, error) {
	if f, ok := c.open[i]; ok {
		return f, nil
	}
	if len(c.open) >= maxOpen {
		c.close()
	}
	f, err := os.Open(c.files[i].path)
	if err != nil {
		return nil, err
	}
	c.open[i] = f
	return f, nil
}

func (c *fileCache) close() {
	for i, f := range c.open {
		f.Close()
		delete(c.open, i)
	}
}
