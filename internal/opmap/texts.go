package opmap

import (
	"sync"
	"unsafe"
)

// MaxTexts bounds the distinct (operation, text) pairs one Recorder keeps;
// later pairs are counted in Texts.Dropped only.
const MaxTexts = 4096

// OpText is one statement text a key operation sent (Op, an index of
// Names).
type OpText struct {
	Op  int
	SQL string
}

// Texts counts, per key operation, the statement texts the engine sent
// while running it (its query tracer, through one Recorder per virtual
// user: no lock shared between users on the hot path), so that samplers
// can attribute a statement's server-side figures (pg_stat_statements) to
// the operations that ran it exactly, whatever was sampled. A nil *Texts
// does nothing. Safe for concurrent use.
type Texts struct {
	mu   sync.Mutex
	recs []*Recorder
}

// Texts returns the map's text counts (made by New), nil on a nil Map.
func (m *Map) Texts() *Texts {
	if m == nil {
		return nil
	}
	return m.texts
}

// Recorder returns a new recorder for one writer (a virtual user), nil
// on a nil Texts.
func (t *Texts) Recorder() *Recorder {
	if t == nil {
		return nil
	}
	r := &Recorder{m: map[OpText]*count{}}
	t.mu.Lock()
	t.recs = append(t.recs, r)
	t.mu.Unlock()
	return r
}

// Counts returns how many times each operation sent each text, summed
// over the recorders, and the number of sends not kept (MaxTexts).
func (t *Texts) Counts() (map[OpText]int64, int64) {
	out := map[OpText]int64{}
	if t == nil {
		return out, 0
	}
	t.mu.Lock()
	recs := append([]*Recorder(nil), t.recs...)
	t.mu.Unlock()
	var dropped int64
	for _, r := range recs {
		r.mu.Lock()
		for k, c := range r.m {
			out[k] += c.n
		}
		dropped += r.dropped
		r.mu.Unlock()
	}
	return out, dropped
}

// Recorder counts one writer's texts. Its lock is taken by its writer and
// by Counts only, so it is uncontended while the run goes on. A nil
// *Recorder does nothing.
//
// A text is counted in m under the text itself, which costs a hash of
// the whole text (an erp statement is kilobytes); a workload's texts are
// mostly the same strings sent again (constants, templates rendered
// once), so once a text is sent again as the very string m holds, it is
// found by its address and length instead (byRef: three words hashed;
// the address is m's own key's, so byRef keeps nothing alive that m does
// not). A text built afresh for each send (a temporary table's name
// inserted) stays on the hashed path.
type Recorder struct {
	mu      sync.Mutex
	m       map[OpText]*count
	byRef   map[textRef]*count
	dropped int64
}

// count is one text's sends and the string m holds it as.
type count struct {
	n    int64
	held *byte
}

// textRef is a string's data address and length, with the operation.
type textRef struct {
	p  *byte
	n  int
	op int
}

// Add counts one send of sql by operation op; Idle or a negative op is
// ignored.
func (r *Recorder) Add(op int, sql string) {
	if r == nil || op < 0 {
		return
	}
	ref := textRef{unsafe.StringData(sql), len(sql), op}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.byRef[ref]; ok {
		c.n++
		return
	}
	c, ok := r.m[OpText{op, sql}]
	switch {
	case ok:
		c.n++
		if c.held == ref.p {
			if r.byRef == nil {
				r.byRef = map[textRef]*count{}
			}
			r.byRef[ref] = c
		}
	case len(r.m) < MaxTexts:
		r.m[OpText{op, sql}] = &count{n: 1, held: ref.p}
	default:
		r.dropped++
	}
}
