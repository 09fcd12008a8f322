package tables

import (
	"encoding/binary"
	"io"
	"sync/atomic"
)

// copyHeader is the binary COPY signature, flags (0: no OIDs) and header
// extension length (0) (https://www.postgresql.org/docs/15/sql-copy.html,
// "Binary Format").
const copyHeader = "PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// copyChunk is how many bytes of rows rowReader generates at a time.
const copyChunk = 64 << 10

// rowKind selects the table a rowReader generates rows for.
type rowKind int

const (
	branchRows rowKind = iota
	tellerRows
	accountRows
)

// copySQL is the COPY statement matching rowReader's column order.
func copySQL(table string, k rowKind, freeze bool) string {
	cols := "(aid, bid, abalance, filler)"
	switch k {
	case branchRows:
		cols = "(bid, bbalance, filler)"
	case tellerRows:
		cols = "(tid, bid, tbalance, filler)"
	}
	opts := "(format binary)"
	if freeze {
		opts = "(format binary, freeze)"
	}
	return "copy " + table + " " + cols + " from stdin " + opts
}

// rowReader is an io.Reader of the binary COPY stream of rows first..last
// (1-based keys, inclusive) of one table, generated on the fly with the
// values pgbench's initBranch, initTeller and initAccount write:
//
//	branch  k: bid k, bbalance 0, filler NULL
//	teller  k: tid k, bid (k-1)/10+1, tbalance 0, filler NULL
//	account k: aid k, bid (k-1)/100000+1, abalance 0, filler '' (the
//	           server pads it to char(84) blanks)
//
// Integers are int4 except aid when bigAid (int8), as the column types.
// With modulus > 0 only the accounts whose aid hashes to remainder
// (hashRemainder) are generated: the rows of one hash partition. The
// number of rows of every generated batch is added to rows, when not nil.
type rowReader struct {
	kind        rowKind
	next, last  int64
	bigAid      bool
	modulus     int
	remainder   int
	rows        *atomic.Int64
	buf         []byte
	pending     []byte
	started     bool
	trailerSent bool
}

func newRowReader(kind rowKind, first, last int64, bigAid bool, rows *atomic.Int64) *rowReader {
	return &rowReader{kind: kind, next: first, last: last, bigAid: bigAid, rows: rows, buf: make([]byte, 0, copyChunk+64)}
}

func (r *rowReader) Read(p []byte) (int, error) {
	if len(r.pending) == 0 {
		if r.trailerSent {
			return 0, io.EOF
		}
		r.fill()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// fill generates the next batch (header first, trailer last) into buf.
func (r *rowReader) fill() {
	b := r.buf[:0]
	if !r.started {
		b = append(b, copyHeader...)
		r.started = true
	}
	var n int64
	for ; r.next <= r.last && len(b) < copyChunk; r.next++ {
		k := r.next
		if r.modulus > 0 && hashRemainder(k, r.bigAid, r.modulus) != r.remainder {
			continue
		}
		n++
		switch r.kind {
		case branchRows:
			b = append(b, 0, 3, 0, 0, 0, 4)
			b = binary.BigEndian.AppendUint32(b, uint32(k))
			b = append(b, 0, 0, 0, 4, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)
		case tellerRows:
			b = append(b, 0, 4, 0, 0, 0, 4)
			b = binary.BigEndian.AppendUint32(b, uint32(k))
			b = append(b, 0, 0, 0, 4)
			b = binary.BigEndian.AppendUint32(b, uint32((k-1)/TellersPerScale+1))
			b = append(b, 0, 0, 0, 4, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff)
		case accountRows:
			if r.bigAid {
				b = append(b, 0, 4, 0, 0, 0, 8)
				b = binary.BigEndian.AppendUint64(b, uint64(k))
			} else {
				b = append(b, 0, 4, 0, 0, 0, 4)
				b = binary.BigEndian.AppendUint32(b, uint32(k))
			}
			b = append(b, 0, 0, 0, 4)
			b = binary.BigEndian.AppendUint32(b, uint32((k-1)/AccountsPerScale+1))
			// abalance 0, then filler: a zero-length string.
			b = append(b, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0)
		}
	}
	if r.rows != nil && n > 0 {
		r.rows.Add(n)
	}
	if r.next > r.last {
		b = append(b, 0xff, 0xff)
		r.trailerSent = true
	}
	r.buf = b
	r.pending = b
}
