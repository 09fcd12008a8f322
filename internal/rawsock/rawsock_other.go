//go:build !linux

package rawsock

import (
	"io"
	"syscall"
)

// Supported tells that the raw path is available on this platform.
const Supported = false

var eof = io.EOF

// Read is not available outside Linux: it returns EINVAL.
func Read(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }

// Write is not available outside Linux: it returns EINVAL.
func Write(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }
