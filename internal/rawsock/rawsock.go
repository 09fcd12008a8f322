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
}

// Wrap returns c with raw Read and Write when c has a file descriptor
// (TCP and Unix sockets) and the platform is supported; otherwise c
// itself.
func Wrap(c net.Conn) net.Conn {
	rc := RawConnOf(c)
	if rc == nil {
		return c
	}
	return &Conn{Conn: c, rc: rc}
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
// returns io.EOF-compatible (0, io.EOF) at the peer's end of stream and
// the wrapped connection's deadline error on a timeout.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			n, errno = Read(fd, b)
			if errno != syscall.EINTR {
				return errno != syscall.EAGAIN
			}
		}
	})
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if errno != 0 {
		return 0, &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: errno}
	}
	if n == 0 {
		return 0, eof
	}
	return n, nil
}

// Write writes all of b, waiting in the netpoller while the socket's
// buffer is full.
func (c *Conn) Write(b []byte) (int, error) {
	done := 0
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for done < len(b) {
			var n int
			n, errno = Write(fd, b[done:])
			if errno == syscall.EAGAIN {
				errno = 0
				return false
			}
			if errno == syscall.EINTR {
				continue
			}
			if errno != 0 {
				return true
			}
			done += n
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return done, &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return done, nil
}
