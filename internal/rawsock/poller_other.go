//go:build !(linux && (amd64 || arm64))

package rawsock

import "errors"

// Interest is not available on this platform (see poller_epoll.go).
type Interest struct{}

// RuntimePoller returns -1: the write interest cannot be changed here.
func RuntimePoller() int { return -1 }

// FindInterests fails on this platform.
func FindInterests(int, ...int) ([]*Interest, error) {
	return nil, errors.New("rawsock: the runtime poller's registrations are not reachable on this platform")
}

// MuteWrites does nothing.
func (r *Interest) MuteWrites() error { return nil }

// RestoreWrites does nothing.
func (r *Interest) RestoreWrites() error { return nil }

// Muted reports false.
func (r *Interest) Muted() bool { return false }
