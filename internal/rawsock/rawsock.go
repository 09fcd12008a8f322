// Package rawsock does socket I/O without waking the Go runtime's sysmon
// thread: read(2) and write(2) on package net's non-blocking sockets go
// through syscall.RawSyscall inside syscall.RawConn's readiness loop, so a
// read that would block waits in the netpoller (deadlines included)
// without first failing with EAGAIN, and no system call is announced to
// the scheduler (runtime.entersyscall), which, when every P of the process
// is idle between two messages, costs a futex wake-up of sysmon and a
// context switch per call. Used by the proxy's relay and, through Conn, by
// the load generator's connections.
//
// Outside Linux, Supported is false and Conn passes through to the
// wrapped connection.
package rawsock

import (
	"net"
	"syscall"
)

// Conn is a net.Conn whose Read and Write use the raw path. Deadlines
// work as on the wrapped connection (syscall.RawConn waits honour them);
// Close, addresses and deadline setters are the wrapped connection's.
type Conn struct {
	net.Conn
	rc syscall.RawConn

	// The read and write loops and their state live in the Conn so that a
	// call allocates nothing (a closure per call would). One Read and one
	// Write may run at once, as on any net.Conn; not two Reads.
	rbuf, wbuf []byte
	rn, wdone  int
	rerr, werr syscall.Errno
	readFn     func(fd uintptr) bool
	writeFn    func(fd uintptr) bool
}

// Wrap returns c with raw Read and Write when c has a file descriptor
// (TCP and Unix sockets) and the platform is supported; otherwise c
// itself.
func Wrap(c net.Conn) net.Conn {
	rc := RawConnOf(c)
	if rc == nil {
		return c
	}
	rs := &Conn{Conn: c, rc: rc}
	rs.readFn = rs.readLoop
	rs.writeFn = rs.writeLoop
	return rs
}

// readLoop is one read attempt for RawConn.Read: false (wait for
// readiness) only when nothing is there.
func (c *Conn) readLoop(fd uintptr) bool {
	for {
		c.rn, c.rerr = Read(fd, c.rbuf)
		if c.rerr != syscall.EINTR {
			return c.rerr != syscall.EAGAIN
		}
	}
}

// writeLoop writes what is left of wbuf for RawConn.Write: false (wait
// for room) when the socket's buffer is full.
func (c *Conn) writeLoop(fd uintptr) bool {
	for c.wdone < len(c.wbuf) {
		n, errno := Write(fd, c.wbuf[c.wdone:])
		switch errno {
		case 0:
			c.wdone += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = errno
			return true
		}
	}
	return true
}

// RawConnOf returns c's file descriptor access, or nil when c has none or
// the platform is not supported (then callers use c's Read and Write).
func RawConnOf(c net.Conn) syscall.RawConn {
	if !Supported {
		return nil
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// Read reads into b, waiting in the netpoller while nothing is there. It
// returns (0, io.EOF) at the peer's end of stream and the wrapped
// connection's deadline error on a timeout.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.rbuf = b
	err := c.rc.Read(c.readFn)
	c.rbuf = nil
	if err == nil && c.rerr != 0 {
		err = c.rerr
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if c.rn == 0 {
		return 0, eof
	}
	return c.rn, nil
}

// Write writes all of b, waiting in the netpoller while the socket's
// buffer is full.
func (c *Conn) Write(b []byte) (int, error) {
	c.wbuf, c.wdone, c.werr = b, 0, 0
	err := c.rc.Write(c.writeFn)
	c.wbuf = nil
	if err == nil && c.werr != 0 {
		err = c.werr
	}
	if err != nil {
		return c.wdone, &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return c.wdone, nil
}
