package techlog

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/erplab/erplab/internal/capture"
)

// WriterOptions shape the journal a Writer produces.
type WriterOptions struct {
	// Started is the capture's Header.Started: Event.T counts from it.
	// Its zone is the journal's (file names and times are written in it).
	Started time.Time
	// Processes is how many rphost_<pid> folders the sessions are spread
	// over, in the order of their first event (0: 2).
	Processes int
	// Infobase (p:processName) and Database (DataBase, server\name);
	// "" gives "erp" and `localhost\erp`.
	Infobase, Database string
}

// Writer writes capture events as a technological journal in the
// grammar Open reads (the package comment): one DBPOSTGRS event per
// KindQuery and KindExecute, in the rphost folder of its session and
// the hour file of its end, each file in the order of the events' ends.
// Session keys that are numbers become t:connectID as they are (others
// are numbered from 1000000); Operation becomes Context; a KindConnect
// gives the session's Usr and dbpid; KindPrepare is remembered for the
// KindExecute of its name. KindCopy is counted in Skipped (the journal
// has no COPY data); KindDisconnect writes nothing. Binary parameters
// are written as text when their type OID is known (ParamOIDs of the
// event or of its KindPrepare), else Write fails.
//
// It is for tests and examples: events of one session must come in
// order, and a line is held until no later event can end before it.
type Writer struct {
	dir      string
	opts     WriterOptions
	types    *pgtype.Map
	files    map[string]*wfile
	sess     map[string]*wsession
	prepared map[[2]string]capture.Event
	pending  lineHeap
	seq      int
	// Skipped counts the events not written, by kind.
	Skipped map[capture.Kind]int
}

type wfile struct {
	f *os.File
	w *bufio.Writer
}

// wsession is what the journal says of a session: its rphost folder,
// t:connectID, OSThread, Usr and dbpid.
type wsession struct {
	folder string
	id     string
	thread int
	user   string
	pid    int32
}

// NewWriter writes a journal under dir (created if missing). Started
// must lie in 2000-2099: file names carry a two-digit year.
func NewWriter(dir string, opts WriterOptions) (*Writer, error) {
	if y := opts.Started.Year(); y < 2000 || y > 2099 {
		return nil, fmt.Errorf("journal writer: Started %v is outside 2000-2099 (file names are YYMMDDHH.log)", opts.Started)
	}
	if opts.Processes <= 0 {
		opts.Processes = 2
	}
	if opts.Infobase == "" {
		opts.Infobase = "erp"
	}
	if opts.Database == "" {
		opts.Database = `localhost\erp`
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Writer{dir: dir, opts: opts, types: pgtype.NewMap(), files: map[string]*wfile{},
		sess: map[string]*wsession{}, prepared: map[[2]string]capture.Event{}, Skipped: map[capture.Kind]int{}}, nil
}

// Write adds one event. Lines are written once no later event can end
// before them; Close writes the rest.
func (w *Writer) Write(e capture.Event) error {
	s := w.session(e.Session)
	switch e.Kind {
	case capture.KindConnect:
		s.user, s.pid = e.Params["user"], e.BackendPID
		return nil
	case capture.KindPrepare:
		w.prepared[[2]string{e.Session, e.Name}] = e
		return nil
	case capture.KindQuery, capture.KindExecute:
	case capture.KindDisconnect:
		return nil
	default:
		w.Skipped[e.Kind]++
		return nil
	}
	text, err := w.line(e, s)
	if err != nil {
		return err
	}
	end := e.T + e.Duration
	w.seq++
	heap.Push(&w.pending, pendingLine{end: end, seq: w.seq, path: w.path(s, end), text: text})
	return w.flush(e.T)
}

// Close writes the held lines and closes the files.
func (w *Writer) Close() error {
	err := w.flush(-1)
	for _, f := range w.files {
		err = errors.Join(err, f.w.Flush(), f.f.Close())
	}
	return err
}

// session returns the journal's facts of session key, making them.
func (w *Writer) session(key string) *wsession {
	if s, ok := w.sess[key]; ok {
		return s
	}
	n := len(w.sess)
	id := key
	if _, err := strconv.ParseUint(key, 10, 32); err != nil {
		id = strconv.Itoa(1000000 + n)
	}
	s := &wsession{folder: fmt.Sprintf("rphost_%d", 2000+n%w.opts.Processes), id: id, thread: 5000 + n}
	w.sess[key] = s
	return s
}

// path is the file of a line of session s ending at end (µs from
// Started): folder/YYMMDDHH.log.
func (w *Writer) path(s *wsession, end int64) string {
	t := w.at(end)
	return filepath.Join(s.folder, t.Format("06010215")+".log")
}

// at is the time µs after Started, in Started's zone.
func (w *Writer) at(us int64) time.Time {
	return w.opts.Started.Add(time.Duration(us) * time.Microsecond)
}

// flush writes the held lines that end at or before t (all for t < 0).
func (w *Writer) flush(t int64) error {
	for w.pending.Len() > 0 && (t < 0 || w.pending[0].end <= t) {
		l := heap.Pop(&w.pending).(pendingLine)
		f, err := w.file(l.path)
		if err != nil {
			return err
		}
		if _, err := f.w.WriteString(l.text); err != nil {
			return err
		}
	}
	return nil
}

// file opens (creates, with the byte-order mark) a journal file.
func (w *Writer) file(rel string) (*wfile, error) {
	if f, ok := w.files[rel]; ok {
		return f, nil
	}
	p := filepath.Join(w.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	wf := &wfile{f: f, w: bufio.NewWriter(f)}
	w.files[rel] = wf
	_, err = wf.w.WriteString(bom)
	return wf, err
}

// pendingLine is a written-out event waiting for its turn: its end
// (µs from Started), arrival number, file and text (with line end).
type pendingLine struct {
	end  int64
	seq  int
	path string
	text string
}

// lineHeap orders held lines by end, then arrival.
type lineHeap []pendingLine

func (h lineHeap) Len() int { return len(h) }
func (h lineHeap) Less(i, j int) bool {
	if h[i].end != h[j].end {
		return h[i].end < h[j].end
	}
	return h[i].seq < h[j].seq
}
func (h lineHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *lineHeap) Push(x any)   { *h = append(*h, x.(pendingLine)) }
func (h *lineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// line is the journal line of statement e of session s.
func (w *Writer) line(e capture.Event, s *wsession) (string, error) {
	sql, prm, err := w.statement(e)
	if err != nil {
		return "", err
	}
	end := w.at(e.T + e.Duration)
	var b strings.Builder
	fmt.Fprintf(&b, "%02d:%02d.%06d-%d,DBPOSTGRS,5,process=rphost,p:processName=%s,OSThread=%d,t:clientID=%d,t:applicationName=1CV8C,t:computerName=WS-%d,t:connectID=%s,SessionID=%s,Usr=%s,AppID=1CV8C,DBMS=DBPOSTGRS,DataBase=%s",
		end.Minute(), end.Second(), end.Nanosecond()/1000, e.Duration, quoteValue(w.opts.Infobase, false), s.thread, s.thread-4000, s.thread-4900,
		s.id, s.id, quoteValue(s.user, false), quoteValue(w.opts.Database, false))
	switch e.TxAfter {
	case "T", "E":
		b.WriteString(",Trans=1")
	case "I":
		b.WriteString(",Trans=0")
	}
	fmt.Fprintf(&b, ",dbpid=%s,Sql=%s", pidText(s.pid), quoteValue(sql, true))
	if prm != "" {
		b.WriteString(",Prm=" + quoteValue(prm, true))
	}
	if e.Rows >= 0 {
		fmt.Fprintf(&b, ",RowsAffected=%d", e.Rows)
	}
	b.WriteString(",Result=" + result(e))
	if e.Operation != "" {
		b.WriteString(",Context=" + quoteValue(e.Operation, true))
	}
	b.WriteByte('\n')
	return b.String(), nil
}

// pidText is dbpid's value: empty when unknown.
func pidText(pid int32) string {
	if pid == 0 {
		return ""
	}
	return strconv.Itoa(int(pid))
}

// result is Result (and Descr for an error): libpq's status.
func result(e capture.Event) string {
	if e.SQLState != "" {
		return "PGRES_FATAL_ERROR,Descr=" + quoteValue("ERROR:  statement failed\nSQLSTATE: "+e.SQLState, true)
	}
	if e.Tag == "" || strings.HasPrefix(e.Tag, "SELECT") {
		return "PGRES_TUPLES_OK"
	}
	return "PGRES_COMMAND_OK"
}

// quoteValue writes v as a property value: bare when it holds no comma,
// quote or line end (and always is false), else in '...' when it holds
// no ', in "..." when it holds no ", else in '...' with ' doubled.
func quoteValue(v string, always bool) string {
	if !always && !strings.ContainsAny(v, ",'\"\n\r") {
		return v
	}
	if !strings.Contains(v, "'") {
		return "'" + v + "'"
	}
	if !strings.Contains(v, `"`) {
		return `"` + v + `"`
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}
