package erp

import (
	"encoding/binary"
	"time"
)

// copyBuf accumulates rows of one table in PostgreSQL's binary COPY format
// (https://www.postgresql.org/docs/15/sql-copy.html, "Binary Format"; the
// per-type wire forms are the *_recv functions of src/backend/utils/adt:
// numeric.c numeric_recv, timestamp.c timestamp_recv, bool.c boolrecv,
// varlena.c bytearecv/textrecv). Encoding by hand into one reused buffer
// avoids a boxed value per column per row, which is where generic COPY
// encoders spend their time.
type copyBuf struct {
	id    tableID
	table string
	sep   bool // prepend the data separator column (value 0) to each row
	b     []byte
	rows  int64
}

// copyHeader is the binary COPY signature, flags (0) and header extension
// length (0).
const copyHeader = "PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// pgEpochMicros is 2000-01-01 00:00:00 UTC in Unix microseconds: binary
// timestamps count microseconds from there (timestamp.c).
const pgEpochMicros = 946684800 * 1000000

func newCopyBuf(id tableID, table string, sep bool, b []byte) *copyBuf {
	c := &copyBuf{id: id, table: table, sep: sep, b: b[:0]}
	c.b = append(c.b, copyHeader...)
	return c
}

// reset empties the buffer for reuse (keeps capacity).
func (c *copyBuf) reset() {
	c.b = append(c.b[:0], copyHeader...)
	c.rows = 0
}

// size is the number of bytes buffered.
func (c *copyBuf) size() int { return len(c.b) }

// finish appends the trailer and returns the full COPY payload.
func (c *copyBuf) finish() []byte {
	return binary.BigEndian.AppendUint16(c.b, 0xffff)
}

// row starts a row of n fields (not counting the separator).
func (c *copyBuf) row(n int) {
	c.rows++
	if c.sep {
		c.b = binary.BigEndian.AppendUint16(c.b, uint16(n+1))
		c.numeric(0, 0)
		return
	}
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(n))
}

func (c *copyBuf) bytea(p []byte) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(p)))
	c.b = append(c.b, p...)
}

func (c *copyBuf) ref(r *Ref) {
	c.b = append(c.b, 0, 0, 0, 16)
	c.b = append(c.b, r[:]...)
}

// rtref writes a 4-byte table-number type code.
func (c *copyBuf) rtref(n int) {
	c.b = append(c.b, 0, 0, 0, 4)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(n))
}

// byte1 writes a 1-byte bytea (composite _type).
func (c *copyBuf) byte1(v byte) { c.b = append(c.b, 0, 0, 0, 1, v) }

// composite writes a _type/_rtref/_rrref triple: a reference to object r
// of table number table, or undefined when table is 0.
func (c *copyBuf) composite(table int, r *Ref) {
	if table == 0 {
		c.byte1(TypeUndefined)
		c.rtref(0)
		var z Ref
		c.ref(&z)
		return
	}
	c.byte1(TypeRef)
	c.rtref(table)
	c.ref(r)
}

func (c *copyBuf) text(s string) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(s)))
	c.b = append(c.b, s...)
}

// textBytes writes a text value held in a byte slice.
func (c *copyBuf) textBytes(s []byte) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(s)))
	c.b = append(c.b, s...)
}

func (c *copyBuf) boolean(v bool) {
	x := byte(0)
	if v {
		x = 1
	}
	c.b = append(c.b, 0, 0, 0, 1, x)
}

func (c *copyBuf) int4(v int32) {
	c.b = append(c.b, 0, 0, 0, 4)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(v))
}

// ts writes a timestamp given in Unix microseconds (UTC wall clock).
func (c *copyBuf) ts(unixMicros int64) {
	c.b = append(c.b, 0, 0, 0, 8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(unixMicros-pgEpochMicros))
}

// tsTime writes t as a timestamp without time zone (its UTC wall clock).
func (c *copyBuf) tsTime(t time.Time) { c.ts(t.UnixMicro()) }

// numeric writes v / 10^dscale as a numeric with display scale dscale
// (0..4): NBASE-10000 digits, weight, sign, dscale as numeric_recv reads
// them.
func (c *copyBuf) numeric(v int64, dscale int) {
	sign := uint16(0)
	u := uint64(v)
	if v < 0 {
		sign = 0x4000
		u = uint64(-v)
	}
	if u == 0 {
		c.b = append(c.b, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0)
		c.b = binary.BigEndian.AppendUint16(c.b, uint16(dscale))
		return
	}
	fracGroups := (dscale + 3) / 4
	u *= [...]uint64{1, 10, 100, 1000}[fracGroups*4-dscale]
	var d [6]uint16 // least significant first
	n := 0
	for u > 0 {
		d[n] = uint16(u % 10000)
		u /= 10000
		n++
	}
	lo := 0
	for lo < n && d[lo] == 0 {
		lo++
	}
	ndigits := n - lo
	weight := n - 1 - fracGroups
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(8+2*ndigits))
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(ndigits))
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(int16(weight)))
	c.b = binary.BigEndian.AppendUint16(c.b, sign)
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(dscale))
	for i := n - 1; i >= lo; i-- {
		c.b = binary.BigEndian.AppendUint16(c.b, d[i])
	}
}
