package rawsock

import (
	"io"
	"syscall"
	"unsafe"
)

// Supported tells that the raw path is available on this platform.
const Supported = true

var eof = io.EOF

// Read is read(2) on a non-blocking socket through syscall.RawSyscall: it
// never blocks, so it need not tell the scheduler it enters a system call
// (see the package doc). It returns the byte count and the errno (0 when
// none; EAGAIN when nothing is there).
func Read(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(r), errno
}

// Write is write(2) on a non-blocking socket through syscall.RawSyscall;
// EAGAIN when the socket's buffer is full.
func Write(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(r), errno
}
