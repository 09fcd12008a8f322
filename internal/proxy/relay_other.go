//go:build !linux

package proxy

import (
	"net"
	"syscall"
)

// rawConnOf returns nil: outside Linux the relay uses Read and Write.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

func rawRead(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }

func rawWrite(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.EINVAL }
