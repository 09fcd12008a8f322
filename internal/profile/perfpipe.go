package profile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Records of perf record's pipe output (perf.data in pipe mode: tools/perf/
// Documentation/perf.data-file-format.txt and include/uapi/linux/
// perf_event.h) that the invalidation recording reads in place of perf
// script, whose text formatting cost about 2 us a probe hit, as much as
// the hit itself.
const (
	recComm          = 3
	recExit          = 4
	recFork          = 7
	recSample        = 9
	recHeaderAttr    = 64
	recTracingData   = 66
	recFinishedRound = 68
	recFinishedInit  = 82

	sampleIP         = 1 << 0
	sampleTID        = 1 << 1
	sampleTime       = 1 << 2
	sampleAddr       = 1 << 3
	sampleRead       = 1 << 4
	sampleCallchain  = 1 << 5
	sampleID         = 1 << 6
	sampleCPU        = 1 << 7
	samplePeriod     = 1 << 8
	sampleStreamID   = 1 << 9
	sampleRaw        = 1 << 10
	sampleIdentifier = 1 << 16

	pipeMagic = 0x32454c4946524550 // "PERFILE2"
)

// pipeItem is a sample of a probe or a task event, in perf's time (ns).
type pipeItem struct {
	t         int64
	kind      uint8 // recSample, recFork or recExit
	pid, ppid int
	// typ is the sample's tracepoint id (common_type); raw its
	// tracepoint record
	typ uint16
	raw []byte
}

// pipeReader decodes perf record's pipe output and hands on its samples
// and task events in time order (perf writes each CPU's buffer in turn:
// what it wrote before a round's end marker and not later than the
// previous round's last time is complete, as perf script orders them).
type pipeReader struct {
	br    *bufio.Reader
	types map[uint64]uint64 // sample id -> sample_type
	// same is the sample_type of every event when they share one (0:
	// they differ, each sample then leads with its identifier)
	same    uint64
	mixed   bool
	pending []pipeItem
	maxT    int64 // latest time read
	// started is called once, at the first task event or sample (or
	// the end of the header): perf writes the tasks it finds before it
	// enables the events
	started func()
}

// readPipe reads r to its end, calling emit for each item in time order.
func readPipe(r io.Reader, started func(), emit func(pipeItem)) error {
	p := &pipeReader{br: bufio.NewReaderSize(r, 256<<10), types: map[uint64]uint64{}, started: started}
	var head [16]byte
	if _, err := io.ReadFull(p.br, head[:]); err != nil {
		return fmt.Errorf("perf record's output: %w", err)
	}
	if binary.LittleEndian.Uint64(head[:]) != pipeMagic {
		return errors.New("perf record's output is not perf.data in pipe mode of this byte order")
	}
	if n := binary.LittleEndian.Uint64(head[8:]); n > 16 {
		if _, err := p.br.Discard(int(n - 16)); err != nil {
			return fmt.Errorf("perf record's output: %w", err)
		}
	}
	var prev int64 // the previous round's latest time
	buf := make([]byte, 1<<16)
	for {
		var h [8]byte
		if _, err := io.ReadFull(p.br, h[:]); err != nil {
			if errors.Is(err, io.EOF) {
				p.flush(1<<63-1, emit)
				return nil
			}
			return fmt.Errorf("perf record's output: %w", err)
		}
		typ, size := binary.LittleEndian.Uint32(h[:]), int(binary.LittleEndian.Uint16(h[6:]))
		if size < 8 {
			return fmt.Errorf("perf record's output: a record of %d bytes", size)
		}
		body := buf[:size-8]
		if _, err := io.ReadFull(p.br, body); err != nil {
			return fmt.Errorf("perf record's output: %w", err)
		}
		if err := p.record(typ, body); err != nil {
			return err
		}
		switch typ {
		case recTracingData: // its data follows the record
			if len(body) < 4 {
				return errors.New("perf record's output: a short tracing data record")
			}
			if _, err := p.br.Discard(int(binary.LittleEndian.Uint32(body))); err != nil {
				return fmt.Errorf("perf record's output: %w", err)
			}
		case recFinishedRound:
			p.flush(prev, emit)
			prev = p.maxT
		}
	}
}

// record decodes one record's body into the pending items.
func (p *pipeReader) record(typ uint32, b []byte) error {
	le := binary.LittleEndian
	switch typ {
	case recComm, recFinishedInit:
		p.start()
	case recHeaderAttr:
		if len(b) < 32 {
			return errors.New("perf record's output: a short attribute record")
		}
		asize := int(le.Uint32(b[4:]))
		if asize < 32 || asize > len(b) {
			return fmt.Errorf("perf record's output: an attribute of %d bytes", asize)
		}
		st := le.Uint64(b[24:])
		switch {
		case p.same == 0 && !p.mixed:
			p.same = st
		case st != p.same:
			p.same, p.mixed = 0, true
		}
		for ids := b[asize:]; len(ids) >= 8; ids = ids[8:] {
			p.types[le.Uint64(ids)] = st
		}
	case recFork, recExit:
		if len(b) < 24 {
			return errors.New("perf record's output: a short task record")
		}
		p.add(pipeItem{t: int64(le.Uint64(b[16:])), kind: uint8(typ), pid: int(le.Uint32(b)), ppid: int(le.Uint32(b[4:]))})
	case recSample:
		it, ok, err := p.sample(b)
		if err != nil {
			return err
		}
		if ok {
			p.add(it)
		}
	}
	return nil
}

// sample decodes a sample (its type the events' common one, or known by
// its leading identifier); ok is false for a sample without a tracepoint record.
func (p *pipeReader) sample(b []byte) (pipeItem, bool, error) {
	le := binary.LittleEndian
	if len(b) < 8 {
		return pipeItem{}, false, errors.New("perf record's output: a short sample")
	}
	st, known := p.same, p.same != 0
	if !known {
		st, known = p.types[le.Uint64(b)]
		known = known && st&sampleIdentifier != 0
	}
	switch {
	case !known:
		return pipeItem{}, false, errors.New("perf record's output: a sample of an unknown event")
	case st&(sampleAddr|sampleRead|sampleCallchain) != 0:
		return pipeItem{}, false, fmt.Errorf("perf record's output: sample type %#x not read", st)
	case st&sampleRaw == 0:
		return pipeItem{}, false, nil
	}
	it := pipeItem{kind: recSample}
	off := 0
	if st&sampleIdentifier != 0 {
		off = 8
	}
	for _, f := range []struct {
		bit  uint64
		size int
	}{{sampleIP, 8}, {sampleTID, 8}, {sampleTime, 8}, {sampleID, 8}, {sampleStreamID, 8}, {sampleCPU, 8}, {samplePeriod, 8}} {
		if st&f.bit == 0 {
			continue
		}
		if off+f.size > len(b) {
			return pipeItem{}, false, errors.New("perf record's output: a short sample")
		}
		switch f.bit {
		case sampleTID:
			it.pid = int(le.Uint32(b[off:]))
		case sampleTime:
			it.t = int64(le.Uint64(b[off:]))
		}
		off += f.size
	}
	if off+4 > len(b) {
		return pipeItem{}, false, errors.New("perf record's output: a short sample")
	}
	n := int(le.Uint32(b[off:]))
	if off+4+n > len(b) || n < 8 {
		return pipeItem{}, false, errors.New("perf record's output: a short tracepoint record")
	}
	it.raw = slices.Clone(b[off+4 : off+4+n])
	it.typ = le.Uint16(it.raw)
	return it, true, nil
}

func (p *pipeReader) add(it pipeItem) {
	p.start()
	p.maxT = max(p.maxT, it.t)
	p.pending = append(p.pending, it)
}

// start calls started once.
func (p *pipeReader) start() {
	if p.started != nil {
		p.started()
		p.started = nil
	}
}

// flush hands on, in time order, the pending items of time <= upTo.
func (p *pipeReader) flush(upTo int64, emit func(pipeItem)) {
	slices.SortStableFunc(p.pending, func(a, b pipeItem) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	i := 0
	for ; i < len(p.pending) && p.pending[i].t <= upTo; i++ {
		emit(p.pending[i])
	}
	p.pending = append(p.pending[:0], p.pending[i:]...)
}

// traceField is where a probe's argument is in its tracepoint record.
type traceField struct {
	off, size int
	signed    bool
}

// readFormat reads a tracepoint's id and the field named field ("" none)
// from its format file under tracefs (events/GROUP/EVENT/format).
func readFormat(tracefs, event, field string) (uint16, traceField, error) {
	group, name, _ := strings.Cut(event, ":")
	b, err := os.ReadFile(filepath.Join(tracefs, "events", group, name, "format"))
	if err != nil {
		return 0, traceField{}, fmt.Errorf("the format of %s: %w", event, err)
	}
	var id uint64
	f := traceField{off: -1}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "ID: "); ok {
			id, err = strconv.ParseUint(v, 10, 16)
		}
		if field == "" || !strings.HasPrefix(l, "field:") || !strings.Contains(l, " "+field+";") {
			continue
		}
		for _, kv := range strings.Split(l, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), ":")
			n, _ := strconv.Atoi(v)
			switch k {
			case "offset":
				f.off = n
			case "size":
				f.size = n
			case "signed":
				f.signed = n == 1
			}
		}
	}
	if err != nil || id == 0 || field != "" && (f.off < 0 || f.size != 4 && f.size != 8) {
		return 0, traceField{}, fmt.Errorf("the format of %s: no id or field %q", event, field)
	}
	return uint16(id), f, nil
}

// value reads the field from a tracepoint record.
func (f traceField) value(raw []byte) (int64, bool) {
	if f.off < 0 || f.off+f.size > len(raw) {
		return 0, false
	}
	if f.size == 8 {
		return int64(binary.LittleEndian.Uint64(raw[f.off:])), true
	}
	v := binary.LittleEndian.Uint32(raw[f.off:])
	if f.signed {
		return int64(int32(v)), true
	}
	return int64(v), true
}
