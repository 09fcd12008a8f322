package top

// The record format of `top --record` (read back by Open for `top
// --play`): what top sees, one frame per sample, in a compact,
// append-only stream that a kill -9 cuts at most into the sample being
// written.
//
//	file    = header segment*
//	header  = one line of JSON (Header), "\n"
//	segment = a raw DEFLATE stream (RFC 1951) of up to SegmentFrames
//	          records, a sync flush after each record, a final block at
//	          its end (the next segment follows at the next byte)
//	record  = uvarint(len(payload)) payload crc32c(payload) (4 bytes, LE)
//	payload = unix nanoseconds of the sample (8 bytes, LE) JSON (Frame)
//
// The sync flush after every record puts every whole record into the
// file as it is taken, so a recording killed at any moment holds every
// sample but the one being written; the reader stops at the first record
// that is cut short or fails its checksum and says so in one line. A
// segment compresses each frame against the previous ones (the query
// texts and session rows repeat from sample to sample), and a new
// segment every SegmentFrames lets the player decode one minute around
// the sample it shows instead of the whole file.

import (
	"bufio"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/erplab/erplab/internal/safefile"
	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// Record format constants.
const (
	// RecordFormat is Header.Format.
	RecordFormat = "erplab top record"
	// RecordVersion is Header.Version; a reader refuses a later one.
	RecordVersion = 1
	// SegmentFrames is how many frames a segment holds.
	SegmentFrames = 60
	// RecordPerm is the permission of a new record file (less the
	// umask): query texts may hold data.
	RecordPerm fs.FileMode = 0o600
	// maxPayload bounds one record when reading (a damaged length).
	maxPayload = 64 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Header is the first line of a record file.
type Header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Erplab is the version of erplab that wrote it.
	Erplab string `json:"erplab,omitempty"`
	// Started is when top started (the storm events' time base).
	Started time.Time `json:"started"`
	// IntervalNs is the sampling interval asked for.
	IntervalNs time.Duration `json:"interval_ns"`
	// Server is the server watched (its role too, for the note a role
	// without pg_monitor gets).
	Server sampler.Info `json:"server"`
	Role   string       `json:"role,omitempty"`
	// HostName and HostCPUs describe the server's machine when it is
	// this one (the host figures are sampled), else are empty.
	HostName string `json:"host_name,omitempty"`
	HostCPUs int    `json:"host_cpus,omitempty"`
	// Sessions says whether frames hold every client session (the
	// sessions and blocking views).
	Sessions bool `json:"sessions"`
}

// Frame is one sample as top shows it: the sample's figures, the other
// databases' catalogs and the storm line as they stood then, and every
// client session when recorded.
type Frame struct {
	Time            time.Time                 `json:"time"`
	Elapsed         float64                   `json:"dt_s,omitempty"`
	Sessions        sampler.Sessions          `json:"sessions"`
	Waits           map[string]int            `json:"waits,omitempty"`
	ParallelWorkers int                       `json:"parallel_workers,omitempty"`
	WaitProfile     map[string]float64        `json:"wait_profile,omitempty"`
	DB              *sampler.DBRates          `json:"db,omitempty"`
	Catalog         []sampler.CatalogRel      `json:"catalog,omitempty"`
	Churn           *sampler.Churn            `json:"churn,omitempty"`
	Host            *sampler.Host             `json:"host,omitempty"`
	HostRates       bool                      `json:"host_rates,omitempty"`
	HostError       string                    `json:"host_error,omitempty"`
	Queries         []sampler.Query           `json:"queries,omitempty"`
	Others          []sampler.DatabaseCatalog `json:"others,omitempty"`
	OthersAt        time.Time                 `json:"others_at,omitzero"`
	Storm           *storm.Event              `json:"storm,omitempty"`
	// Inval is the invalidation line shown live (top --probes), "" none.
	Inval string `json:"inval,omitempty"`
	// List is every client session of every database (ReadSessions
	// with no filter), nil when not read.
	List []Session `json:"list,omitempty"`
}

// frameOf is what st shows now, with the sessions list.
func frameOf(st *state, list []Session) Frame {
	s := st.last
	f := Frame{Time: s.Time, Elapsed: s.Elapsed, Sessions: s.Sessions, Waits: s.Waits, ParallelWorkers: s.ParallelWorkers,
		WaitProfile: s.WaitProfile, DB: s.DB, Catalog: s.Catalog, Churn: s.Churn, Host: s.Host, HostError: s.HostError,
		Queries: s.Queries, Others: st.others, OthersAt: st.othersAt, Storm: st.storm, Inval: st.inval, List: list}
	if s.Host != nil {
		f.HostRates = s.Host.Rates
	}
	return f
}

// sample is the frame as a sampler.Sample for the view.
func (f *Frame) sample() *sampler.Sample {
	s := &sampler.Sample{Time: f.Time, Elapsed: f.Elapsed, Sessions: f.Sessions, Waits: f.Waits, ParallelWorkers: f.ParallelWorkers,
		WaitProfile: f.WaitProfile, DB: f.DB, Catalog: f.Catalog, Churn: f.Churn, HostError: f.HostError, Queries: f.Queries}
	if f.Host != nil {
		h := *f.Host
		h.Rates = f.HostRates
		s.Host = &h
	}
	return s
}

// Recorder appends frames to a record file. Print and Run write its
// header (the server, the interval, when top started) before the first
// frame.
type Recorder struct {
	h     Header
	began bool
	f     *os.File
	bw    *bufio.Writer
	fw    *flate.Writer
	n     int // frames in the current segment
	total int
	buf   []byte
	path  string
	// texts numbers the query texts of the current segment.
	texts map[string]int
}

// Create makes a new record file at path (safefile.Create: an existing
// file, directory or link there is refused). h gives the header's
// Erplab, HostName and HostCPUs; Print or Run fill in the rest.
func Create(path string, h Header) (*Recorder, error) {
	f, err := safefile.Create(path, RecordPerm)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	fw, _ := flate.NewWriter(bw, flate.BestCompression) // the level is valid
	return &Recorder{h: h, f: f, bw: bw, fw: fw, path: path}, nil
}

// begin writes the header line (once).
func (r *Recorder) begin(info sampler.Info, started time.Time, interval time.Duration, sessions bool) error {
	if r.began {
		return nil
	}
	r.began = true
	h := r.h
	h.Format, h.Version = RecordFormat, RecordVersion
	h.Server, h.Role, h.Started, h.IntervalNs, h.Sessions = info, info.Role, started, interval, sessions
	line, err := json.Marshal(h)
	if err == nil {
		_, err = r.f.Write(append(line, '\n'))
	}
	if err != nil {
		return fmt.Errorf("record: %s: %w", r.path, err)
	}
	r.h = h
	return nil
}

// Path is the file's path as given.
func (r *Recorder) Path() string { return r.path }

// Frames is how many frames were written.
func (r *Recorder) Frames() int { return r.total }

// Add appends one frame and pushes it to the file (one write(2)), so a
// kill loses at most a frame being written.
func (r *Recorder) Add(fr Frame) error {
	if !r.began {
		return errors.New("record: no header written")
	}
	if r.n == 0 {
		r.texts = map[string]int{} // a segment decodes on its own
	}
	js, err := json.Marshal(r.wire(fr))
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	payload := binary.LittleEndian.AppendUint64(r.buf[:0], uint64(fr.Time.UnixNano()))
	payload = append(payload, js...)
	rec := binary.AppendUvarint(nil, uint64(len(payload)))
	rec = append(rec, payload...)
	rec = binary.LittleEndian.AppendUint32(rec, crc32.Checksum(payload, crcTable))
	r.buf = payload
	if _, err := r.fw.Write(rec); err != nil {
		return fmt.Errorf("record: %s: %w", r.path, err)
	}
	r.n++
	r.total++
	if r.n == SegmentFrames {
		err = r.fw.Close()
		r.fw.Reset(r.bw)
		r.n = 0
	} else {
		err = r.fw.Flush()
	}
	if err == nil {
		err = r.bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("record: %s: %w", r.path, err)
	}
	return nil
}

// Query texts are written once a segment: a frame lists the texts it
// is the first of the segment to use (Texts, numbered on from the
// segment's earlier frames' texts) and its sessions and queries name
// them by number (Q). Every session's text repeats sample after
// sample; written out, they were 60 % of a frame.
type (
	wireFrame struct {
		Frame
		List    []wireSession `json:"list,omitempty"`
		Queries []wireQuery   `json:"queries,omitempty"`
		Texts   []string      `json:"texts,omitempty"`
	}
	wireSession struct {
		Session
		Query string `json:"query,omitempty"` // left empty: Q
		Q     int    `json:"q"`
	}
	wireQuery struct {
		sampler.Query
		Text string `json:"Text,omitempty"` // left empty: Q
		Q    int    `json:"q"`
	}
)

// wire is fr as written, its texts numbered.
func (r *Recorder) wire(fr Frame) wireFrame {
	w := wireFrame{Frame: fr}
	num := func(t string) int {
		n, ok := r.texts[t]
		if !ok {
			n = len(r.texts)
			r.texts[t] = n
			w.Texts = append(w.Texts, t)
		}
		return n
	}
	for _, s := range fr.List {
		w.List = append(w.List, wireSession{Session: s, Q: num(s.Query)})
	}
	for _, q := range fr.Queries {
		w.Queries = append(w.Queries, wireQuery{Query: q, Q: num(q.Text)})
	}
	return w
}

// unwire is the frame of w, its texts looked up in (and w's added to)
// the segment's table.
func unwire(w *wireFrame, table *[]string) (Frame, error) {
	*table = append(*table, w.Texts...)
	text := func(q int) (string, error) {
		if q < 0 || q >= len(*table) {
			return "", fmt.Errorf("query text %d not defined", q)
		}
		return (*table)[q], nil
	}
	f := w.Frame
	f.List, f.Queries = nil, nil
	for _, s := range w.List {
		t, err := text(s.Q)
		if err != nil {
			return Frame{}, err
		}
		s.Session.Query = t
		f.List = append(f.List, s.Session)
	}
	for _, q := range w.Queries {
		t, err := text(q.Q)
		if err != nil {
			return Frame{}, err
		}
		q.Query.Text = t
		f.Queries = append(f.Queries, q.Query)
	}
	return f, nil
}

// Close ends the last segment, syncs and closes the file.
func (r *Recorder) Close() error {
	var err error
	if r.n > 0 {
		err = r.fw.Close()
	}
	err = errors.Join(err, r.bw.Flush(), r.f.Sync(), r.f.Close())
	if err != nil {
		return fmt.Errorf("record: %s: %w", r.path, err)
	}
	return nil
}

// countingReader counts the bytes read through it; it is a
// flate.Reader (ReadByte), so the decompressor reads no byte past a
// segment's final block.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// readRecord reads one record's payload from a segment: io.EOF at the
// segment's clean end; any other error is a record cut short or damaged.
func readRecord(br *bufio.Reader) ([]byte, error) {
	if _, err := br.Peek(1); err != nil {
		return nil, err // io.EOF: the segment's end; io.ErrUnexpectedEOF: the file's, between records
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, errTorn{noEOF(err)}
	}
	if n < 8 || n > maxPayload {
		return nil, errTorn{fmt.Errorf("record length %d out of range", n)}
	}
	b := make([]byte, n+4)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, errTorn{noEOF(err)}
	}
	p := b[:n]
	if crc32.Checksum(p, crcTable) != binary.LittleEndian.Uint32(b[n:]) {
		return nil, errTorn{errors.New("checksum mismatch")}
	}
	return p, nil
}

// errTorn is a record cut short or damaged.
type errTorn struct{ err error }

func (e errTorn) Error() string { return e.err.Error() }
func (e errTorn) Unwrap() error { return e.err }

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
