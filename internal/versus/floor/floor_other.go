//go:build !linux

package floor

import "net"

// Relay is not available outside Linux.
type Relay struct{}

// Start returns ErrUnsupported outside Linux.
func Start(dial func() (net.Conn, error)) (*Relay, error) { return nil, ErrUnsupported }

// Addr is nil outside Linux.
func (r *Relay) Addr() *net.TCPAddr { return nil }

// Close does nothing outside Linux.
func (r *Relay) Close() error { return nil }
