package top

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/sampler"
	"github.com/erplab/erplab/internal/storm"
)

// Recording is a record file opened for playing: its header, an index
// of its frames (time and segment), and the last segments decoded. Only
// the index stays in memory (16 bytes a frame); frames are decoded a
// segment (SegmentFrames) at a time.
type Recording struct {
	Header Header
	// Note is one line when the file does not end cleanly: cut short
	// (a torn or damaged last record) or not closed (top killed, or
	// still recording); "" otherwise.
	Note string

	path   string
	f      *os.File
	times  []int64 // unix ns of each frame
	segs   []int64 // file offset of each segment
	first  []int   // index of each segment's first frame
	cache  map[int][]Frame
	recent []int // cached segments, oldest first
	// noQueries is what the query table says when the queries were not
	// kept ("" when they were).
	noQueries string
	// mem holds every frame when the recording was built in memory
	// (FromFrames); f is nil then.
	mem []Frame
}

// ErrNotRecord is Open's error for a file of another format.
var ErrNotRecord = errors.New("not an erplab top record")

// cachedSegments is how many decoded segments a Recording keeps.
const cachedSegments = 3

// Open reads path's header and indexes its frames, checking every
// record's checksum. A file that ends in a torn or damaged record, or
// without its last segment's end, opens with the whole frames before
// and Note saying so. Errors: no header, another format or a later
// version, no whole frame at all.
func Open(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r := &Recording{path: path, f: f, cache: map[int][]Frame{}}
	if err := r.index(); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// index reads the header and every record's length, time and checksum.
func (r *Recording) index() error {
	br := bufio.NewReaderSize(r.f, 256<<10)
	line, err := br.ReadBytes('\n')
	if err != nil && !bytes.Contains(line, []byte(`"format":"`+RecordFormat+`"`)) {
		return fmt.Errorf("%s:1: %w (first line: %.40q)", r.path, ErrNotRecord, strings.TrimSpace(string(line)))
	}
	if err != nil {
		return fmt.Errorf("%s: no whole record header (a file cut short?)", r.path)
	}
	if err := json.Unmarshal(line, &r.Header); err != nil || r.Header.Format != RecordFormat {
		return fmt.Errorf("%s:1: %w (first line: %.40q)", r.path, ErrNotRecord, strings.TrimSpace(string(line)))
	}
	if r.Header.Version > RecordVersion {
		return fmt.Errorf("%s: record version %d, this erplab reads up to %d (a newer erplab wrote it)", r.path, r.Header.Version, RecordVersion)
	}
	cr := &countingReader{r: br, n: int64(len(line))}
	for {
		if _, err := br.Peek(1); err == io.EOF {
			break // the file ends at a segment's end: closed cleanly
		}
		start := cr.n
		r.segs, r.first = append(r.segs, start), append(r.first, len(r.times))
		zb := bufio.NewReader(flate.NewReader(cr))
		for {
			p, err := readRecord(zb)
			if err == io.EOF {
				break
			}
			if err != nil {
				r.noteEnd(err, start)
				return r.check()
			}
			r.times = append(r.times, int64(binary.LittleEndian.Uint64(p)))
		}
		if len(r.times) == r.first[len(r.first)-1] {
			r.segs, r.first = r.segs[:len(r.segs)-1], r.first[:len(r.first)-1]
		}
	}
	return r.check()
}

// noteEnd sets Note for a file that ends with err in the segment at
// file offset start, and drops that segment when it holds no frame.
func (r *Recording) noteEnd(err error, start int64) {
	n := len(r.times)
	if r.first[len(r.first)-1] == n {
		r.segs, r.first = r.segs[:len(r.segs)-1], r.first[:len(r.first)-1]
	}
	var torn errTorn
	if !errors.As(err, &torn) && errors.Is(err, io.ErrUnexpectedEOF) {
		r.Note = fmt.Sprintf("%s: the recording was not closed (top killed, or still recording): %d whole samples", r.path, n)
		return
	}
	r.Note = fmt.Sprintf("%s: the record after sample %d is cut short or damaged (%v, in the segment at byte %d): playing the %d whole samples before it", r.path, n, err, start, n)
}

func (r *Recording) check() error {
	if len(r.times) == 0 {
		if r.Note != "" {
			return errors.New(r.Note)
		}
		return fmt.Errorf("%s: the recording holds no sample", r.path)
	}
	return nil
}

// FromFrames is a Recording of frames held in memory (a run's results).
func FromFrames(h Header, frames []Frame) (*Recording, error) {
	if len(frames) == 0 {
		return nil, errors.New("no samples to play")
	}
	r := &Recording{Header: h, mem: frames}
	for _, f := range frames {
		r.times = append(r.times, f.Time.UnixNano())
	}
	return r, nil
}

// Close closes the file.
func (r *Recording) Close() error {
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}

// Len is the number of whole frames.
func (r *Recording) Len() int { return len(r.times) }

// Time is frame i's sample time.
func (r *Recording) Time(i int) time.Time { return time.Unix(0, r.times[i]) }

// Offset is frame i's time since the first frame.
func (r *Recording) Offset(i int) time.Duration { return time.Duration(r.times[i] - r.times[0]) }

// Frame returns frame i, decoding its segment when not cached.
func (r *Recording) Frame(i int) (*Frame, error) {
	if i < 0 || i >= len(r.times) {
		return nil, fmt.Errorf("no sample %d (the recording has %d)", i+1, len(r.times))
	}
	if r.mem != nil {
		return &r.mem[i], nil
	}
	seg := r.segmentOf(i)
	fs, ok := r.cache[seg]
	if !ok {
		var err error
		if fs, err = r.decode(seg); err != nil {
			return nil, err
		}
		r.cache[seg] = fs
		r.recent = append(r.recent, seg)
		if len(r.recent) > cachedSegments {
			delete(r.cache, r.recent[0])
			r.recent = r.recent[1:]
		}
	}
	return &fs[i-r.first[seg]], nil
}

// segmentOf is the segment holding frame i.
func (r *Recording) segmentOf(i int) int {
	lo, hi := 0, len(r.first)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if r.first[mid] <= i {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// decode reads the frames of segment seg (as many as the index holds).
func (r *Recording) decode(seg int) ([]Frame, error) {
	n := len(r.times) - r.first[seg]
	if seg+1 < len(r.first) {
		n = r.first[seg+1] - r.first[seg]
	}
	sr := io.NewSectionReader(r.f, r.segs[seg], 1<<62)
	zb := bufio.NewReader(flate.NewReader(bufio.NewReader(sr)))
	out := make([]Frame, n)
	var table []string
	for k := range out {
		p, err := readRecord(zb)
		if err == nil {
			var w wireFrame
			if err = json.Unmarshal(p[8:], &w); err == nil {
				out[k], err = unwire(&w, &table)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: sample %d: %w", r.path, r.first[seg]+k+1, noEOF(err))
		}
	}
	return out, nil
}

// Find is the frame at when: a time since the first frame ("41m",
// "1h2m") or a clock time of the recording's day ("12:03:05", in the
// recording's time zone). atOrBefore picks the last frame at or before
// it (what the screen showed then), else the first at or after it.
// Errors: a malformed time, one outside the recording.
func (r *Recording) Find(when string, atOrBefore bool) (int, error) {
	loc := r.Time(0).Location()
	if first, _ := r.Frame(0); first != nil {
		loc = first.Time.Location()
	}
	target, isDur, err := When(when, "recording", r.Time(0), r.Time(len(r.times)-1), loc)
	if err != nil {
		return 0, err
	}
	// The screens show whole seconds: a duration names the samples
	// within half a second of it, a clock time its whole second.
	tn := target.UnixNano()
	switch {
	case atOrBefore && isDur:
		tn += int64(time.Second / 2)
	case atOrBefore:
		tn += int64(time.Second - 1)
	case isDur:
		tn -= int64(time.Second / 2)
	}
	last := len(r.times) - 1
	span := fmt.Sprintf("the recording runs from %s to %s (+%s)", r.clock(0), r.clock(last), clockDur(r.Offset(last)))
	slack := int64(r.interval())
	switch {
	case tn < r.times[0]-slack:
		return 0, fmt.Errorf("%q is before the first sample: %s", when, span)
	case tn > r.times[last]+slack:
		return 0, fmt.Errorf("%q is after the last sample: %s", when, span)
	}
	if atOrBefore {
		i := last
		for i > 0 && r.times[i] > tn {
			i--
		}
		return i, nil
	}
	i := 0
	for i < last && r.times[i] < tn {
		i++
	}
	return i, nil
}

// When is the time named by when in a span (a "recording", a "run") from
// t0 to last: a time since t0 ("41m", "1h2m3s"; dur true) or a clock time
// of t0's day in loc ("12:03:05"), the next day's when that day's time
// is before t0 and the span goes past midnight. Errors: a malformed time,
// naming what the span is.
func When(when, span string, t0, last time.Time, loc *time.Location) (target time.Time, dur bool, err error) {
	if d, err := time.ParseDuration(when); err == nil {
		return t0.Add(d), true, nil
	}
	c, err := time.Parse(time.TimeOnly, when)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%q: want a time since the %s's start (41m, 1h2m3s) or a clock time (12:03:05)", when, span)
	}
	y, m, d := t0.In(loc).Date()
	target = time.Date(y, m, d, c.Hour(), c.Minute(), c.Second(), 0, loc)
	if next := target.AddDate(0, 0, 1); target.Before(t0.Add(-time.Second)) && !next.After(last.Add(time.Second)) {
		target = next // the span goes past midnight
	}
	return target, false, nil
}

// clock is frame i's time of day in the recording's zone.
func (r *Recording) clock(i int) string {
	if f, err := r.Frame(i); err == nil {
		return f.Time.Format(time.TimeOnly)
	}
	return r.Time(i).Format(time.TimeOnly)
}

// clockDur formats an offset as 0s, 41m05s, 1h02m03s.
func clockDur(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm%02ds", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// FromObservations is a Recording of a run's observations (the
// "observations" section of its results, sampler.Observations; started
// is the run's start, the T axis's origin): every sample's sessions,
// waits and header figures and the storm line as it stood then. The
// results keep neither the longest queries nor the session list, so the
// query table is empty and the sessions and blocking views are off;
// Note says so.
func FromObservations(name string, started time.Time, o *sampler.Observations) (*Recording, error) {
	h := Header{Format: RecordFormat, Version: RecordVersion, Started: started,
		IntervalNs: time.Duration(o.IntervalS * float64(time.Second)), Server: o.Server}
	frames := make([]Frame, 0, len(o.Series))
	var others []sampler.DatabaseCatalog
	var othersAt time.Time
	for i := range o.Series {
		s := &o.Series[i]
		s.Time = started.Add(time.Duration(s.T * float64(time.Second)))
		if s.OtherCatalogs != nil {
			others, othersAt = s.OtherCatalogs, s.Time
		}
		f := Frame{Time: s.Time, Elapsed: s.Elapsed, Sessions: s.Sessions, Waits: s.Waits, ParallelWorkers: s.ParallelWorkers,
			WaitProfile: s.WaitProfile, DB: s.DB, Catalog: s.Catalog, Churn: s.Churn, Host: s.Host, HostRates: s.Host != nil && i > 0,
			HostError: s.HostError, Others: others, OthersAt: othersAt, Storm: stormAt(o.Storms, s.T)}
		frames = append(frames, f)
	}
	r, err := FromFrames(h, frames)
	if err != nil {
		return nil, fmt.Errorf("%s: the run's observations hold no sample", name)
	}
	r.path = name
	r.noQueries = "(not kept in a run's results)"
	r.Note = fmt.Sprintf("%s: a run's results keep each sample's sessions, waits and header figures, not the longest queries or the session list", name)
	return r, nil
}

// stormAt is the latest storm fired at or before t as it stood at t
// (ongoing when it ended later).
func stormAt(storms []storm.Event, t float64) *storm.Event {
	var last *storm.Event
	for i := range storms {
		if storms[i].T <= t && (last == nil || storms[i].T >= last.T) {
			last = &storms[i]
		}
	}
	if last == nil {
		return nil
	}
	e := *last
	if e.EndT != nil && *e.EndT > t {
		e.EndT = nil
	}
	return &e
}
