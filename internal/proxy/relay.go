package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"time"
)

// relayBuffer is the initial size in bytes of each session's read buffers
// (one per direction); a message larger than it grows the buffer to the
// message's size, and the buffer shrinks back to it as soon as the
// message was handled (see inbound.release).
const relayBuffer = 32 * 1024

// growAhead bounds a read buffer's growth for a message larger than it:
// to the message's announced size once that is at most growAhead times
// what has arrived, else to twice what has arrived. A 150 MiB message so
// costs allocations and copies of 64 MiB on the way instead of 256 MiB,
// and a client that announces a long message and stalls makes the proxy
// allocate at most growAhead times what it sent.
const growAhead = 4

// frameSize returns the size in bytes of the typed protocol message
// (type byte, 4-byte length, body) at the start of b, 0 when b does not
// hold all of it yet, or an error for an invalid length or one over
// limit (the length field's value)
// (https://www.postgresql.org/docs/current/protocol-overview.html#PROTOCOL-MESSAGE-CONCEPTS).
func frameSize(b []byte, limit int) (int, error) {
	if len(b) < 5 {
		return 0, nil
	}
	n := int(binary.BigEndian.Uint32(b[1:5]))
	if n < 4 || n > limit {
		return 0, fmt.Errorf("invalid message length %d", n)
	}
	if len(b) < n+1 {
		return 0, nil
	}
	return n + 1, nil
}

// streamMin is the size in bytes from which a message the proxy need
// not see whole (a client's CopyData or Bind, a server's DataRow or
// CopyData) is relayed as it arrives rather than gathered first: the
// session's buffers then stay at relayBuffer whatever the size of a row,
// a parameter or a COPY line.
const streamMin = 4 * relayBuffer

// streamRest returns how many bytes of the incomplete message at the
// start of b (at least its header; its length checked by frameSize) are
// still to come, or 0 when it is shorter than streamMin.
func streamRest(b []byte) int {
	if len(b) < 5 {
		return 0
	}
	total := int(binary.BigEndian.Uint32(b[1:5])) + 1
	if total < streamMin {
		return 0
	}
	return total - len(b)
}

// smallMessage is PostgreSQL's limit on the length of the client
// messages that carry no data (PQ_SMALL_MESSAGE_LIMIT).
const smallMessage = 10000

// frontendLimit is the longest length (the length field's value) of a
// client message of type typ after authentication: large (the session's
// limit) for those that carry data (Query, Parse, Bind, FunctionCall,
// CopyData), smallMessage for the others PostgreSQL knows (Sync, Flush,
// Execute, Describe, Close, Terminate, CopyDone, CopyFail), 0 for a type
// PostgreSQL rejects with "invalid frontend message type" (its
// SocketBackend, src/backend/tcop/postgres.c, checks the type byte
// before it reads the length).
func frontendLimit(typ byte, large int) int {
	switch {
	case carriesData(typ):
		return large
	case typ == 'S' || typ == 'H' || typ == 'E' || typ == 'D' || typ == 'C' || typ == 'X' || typ == 'c' || typ == 'f':
		return smallMessage
	}
	return 0
}

// carriesData reports whether a client message of type typ may be long
// (see frontendLimit).
func carriesData(typ byte) bool {
	return typ == 'Q' || typ == 'P' || typ == 'B' || typ == 'F' || typ == 'd'
}

// inbound reads one side of a session into a reused buffer and hands the
// bytes received to a handler, which consumes whole messages. It reads
// with the connection's own Read until that fails: the peer's close is
// the EOF of the next read, whatever event brought it.
type inbound struct {
	conn net.Conn
	buf  []byte
	n    int // bytes of buf holding unconsumed data
	// skip is the handler's: bytes of a message it relays as they
	// arrive (see streamMin) still to come.
	skip int
	// freed, if set, is called when release dropped a buffer of at
	// least returnThreshold bytes.
	freed func()
}

func newInbound(c net.Conn, freed func()) *inbound {
	return &inbound{conn: c, buf: make([]byte, relayBuffer), freed: freed}
}

// errStop ends inbound.run without an error.
var errStop = errors.New("stop")

// run reads until the connection fails, is closed, or handle returns an
// error. handle gets the unconsumed bytes (the buffer's start, valid until
// it returns) and returns how many it consumed (whole messages). run
// returns io.EOF when the peer closed, handle's error (nil for errStop),
// or the read error.
func (in *inbound) run(handle func([]byte) (int, error)) error {
	if in.n > 0 { // bytes read ahead during the startup phase
		if err := in.process(handle); err != nil {
			return stopErr(err)
		}
	}
	for {
		in.prepare()
		n, err := in.conn.Read(in.buf[in.n:])
		in.n += n
		if n > 0 {
			if herr := in.process(handle); herr != nil {
				return stopErr(herr)
			}
		}
		if err != nil {
			return err
		}
	}
}

// process hands the unconsumed bytes to handle, compacts the buffer and
// returns handle's error.
func (in *inbound) process(handle func([]byte) (int, error)) error {
	used, err := handle(in.buf[:in.n])
	if used > 0 {
		in.n = copy(in.buf, in.buf[used:in.n])
	}
	in.release()
	return err
}

// prepare makes room for the rest of a partly received message and
// returns the free space in bytes. A buffer grows as the message arrives
// (see growAhead), not to the size its header announces.
func (in *inbound) prepare() int {
	if in.n >= 5 && in.n == len(in.buf) {
		need := int(binary.BigEndian.Uint32(in.buf[1:5])) + 1 // checked by handle's frameSize
		if need > len(in.buf) {
			size := 2 * len(in.buf)
			if need <= growAhead*len(in.buf) {
				size = need
			}
			nb := make([]byte, min(need, size))
			copy(nb, in.buf[:in.n])
			in.buf = nb
		}
	}
	return len(in.buf) - in.n
}

// release drops a buffer that grew for a large message once the handler
// consumed it (what is left fits the initial size): the session keeps
// no memory of its largest message while it idles, nor until its next
// read. The handler wrote what it relayed before returning, so nothing
// references the old buffer.
func (in *inbound) release() {
	if len(in.buf) > relayBuffer && in.n <= relayBuffer {
		big := len(in.buf) >= returnThreshold
		nb := make([]byte, relayBuffer)
		in.n = copy(nb, in.buf[:in.n])
		in.buf = nb
		if big && in.freed != nil {
			in.freed()
		}
	}
}

// returnThreshold is the size of a released read buffer from which the
// proxy returns free memory to the operating system (Proxy.returnMemory).
const returnThreshold = 16 << 20

// returnDelay is how long Proxy.returnMemory waits, so that the buffers
// released meanwhile (other sessions', the other direction's) are
// returned by the same collection.
const returnDelay = 100 * time.Millisecond

// returnMemory has the Go runtime collect and return its free memory to
// the operating system (debug.FreeOSMemory) returnDelay from now, unless
// that is planned already: a session released a buffer of a large
// message (inbound.release). Without it the heap the buffer occupied
// stays resident until the next collection, which an idle proxy runs
// only every two minutes (three 150 MiB Queries left 636 MiB resident
// for that long; with it, the proxy is back near its baseline within a
// second). It costs one forced collection per returnDelay at most, and
// only while messages of returnThreshold bytes or more are relayed.
func (p *Proxy) returnMemory() {
	if p.returning.Swap(true) {
		return
	}
	time.AfterFunc(returnDelay, func() {
		p.returning.Store(false) // a buffer released from now on plans the next one
		debug.FreeOSMemory()
	})
}

func stopErr(err error) error {
	if err == errStop {
		return nil
	}
	return err
}

// outbound collects the bytes of one batch for a connection and writes
// them with one Write. Bytes added while nothing else is pending, or
// directly following the pending bytes in the same array (consecutive
// relayed messages of the inbound buffer), are only referenced, not
// copied; anything else is coalesced into a scratch buffer. Callers flush
// before the referenced bytes change.
type outbound struct {
	conn    net.Conn
	pending []byte // referenced, not owned
	scratch []byte
	inUse   bool // scratch holds the batch
}

func newOutbound(c net.Conn) *outbound {
	return &outbound{conn: c}
}

// add queues b for the next flush.
func (o *outbound) add(b []byte) {
	switch {
	case len(b) == 0:
	case o.inUse:
		o.scratch = append(o.scratch, b...)
	case o.pending == nil:
		o.pending = b
	case cap(o.pending)-len(o.pending) >= len(b) && &o.pending[:len(o.pending)+1][len(o.pending)] == &b[0]:
		o.pending = o.pending[:len(o.pending)+len(b)] // b follows in the same buffer
	default:
		o.scratch = append(append(o.scratch[:0], o.pending...), b...)
		o.pending, o.inUse = nil, true
	}
}

// flush writes what was added, waiting while the socket is full.
func (o *outbound) flush() error {
	var b []byte
	if o.inUse {
		b = o.scratch
	} else {
		b = o.pending
	}
	o.pending, o.inUse = nil, false
	if cap(o.scratch) > 4*relayBuffer { // b keeps the array until written
		o.scratch = nil
	} else {
		o.scratch = o.scratch[:0]
	}
	if len(b) == 0 {
		return nil
	}
	_, err := o.conn.Write(b)
	return err
}
