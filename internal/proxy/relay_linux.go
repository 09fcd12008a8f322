package proxy

import (
	"net"
	"syscall"
	"unsafe"
)

// rawConnOf returns c's file descriptor access, or nil when c has none
// (then the relay uses Read and Write).
func rawConnOf(c net.Conn) syscall.RawConn {
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

// rawRead and rawWrite are read(2) and write(2) on a non-blocking socket
// (package net makes every socket non-blocking) through
// syscall.RawSyscall: they never block, so they need not tell the
// scheduler they enter a system call. Skipping that matters in a relay:
// when all of the process's Ps were idle, which is the normal state of a
// proxy between messages, each ordinary system call wakes the runtime's
// sysmon thread (runtime.entersyscall), which on a small machine costs a
// futex wake-up on the message's path and a thread taking CPU from the
// client and the server: with syscall.Read and Write, pgbench -S through
// the proxy (1 client, 2 CPUs) cost 0.4-1.5 futex and 0.3-0.9 nanosleep
// calls and 3.4-5.3 context switches per transaction; with these, under
// 0.01 and 2.4-2.6 (PgBouncer: 2.0).
func rawRead(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(r), errno
}

func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(r), errno
}
