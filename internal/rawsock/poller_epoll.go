//go:build linux && (amd64 || arm64)

package rawsock

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Interest is a socket's entry in the Go runtime's epoll set (the
// netpoller), which package net registers for EPOLLIN|EPOLLOUT|EPOLLRDHUP
// edge-triggered once and never modifies. The write interest costs a
// wake-up whenever the kernel signals write space while nobody waits to
// write: on a Unix socket that happens every time the peer reads what was
// written (af_unix.c's unix_write_space), so a request-response relay
// over a Unix socket gets one spurious EPOLLOUT event per request, and
// the thread parked in epoll_pwait wakes, polls again and parks again for
// nothing (2 of the 7 system calls and a context switch per pgbench -S
// transaction of the proxy). Interest lets the relay drop the write
// interest while it is not waiting for room and restore it before it
// waits, as an event loop such as PgBouncer's (libevent) does.
//
// Methods must be called while the descriptor is held (inside
// syscall.RawConn's Control, Read or Write callbacks), so that it cannot
// be closed and reused meanwhile.
type Interest struct {
	epfd, fd int
	events   uint32 // as registered by the runtime
	data     uint64 // the runtime's poll descriptor reference, kept verbatim
	muted    bool
}

// RuntimePoller returns the descriptor of the Go runtime's epoll
// instance: the process's only eventpoll descriptor in /proc/self/fd, or
// -1 when there is none or several (another library's), when nothing is
// changed.
func RuntimePoller() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	found := -1
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || l != "anon_inode:[eventpoll]" {
			continue
		}
		if found >= 0 {
			return -1
		}
		if found, err = strconv.Atoi(e.Name()); err != nil {
			return -1
		}
	}
	return found
}

// FindInterests returns the registrations of fds in epfd's set, read
// from /proc/self/fdinfo/EPFD (one line "tfd: FD events: HEX data: HEX"
// per registered descriptor); a descriptor not registered, or registered
// without EPOLLOUT|EPOLLET, gets nil. The cost grows with the size of the
// set (one line per registered descriptor).
func FindInterests(epfd int, fds ...int) ([]*Interest, error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return nil, fmt.Errorf("rawsock: read the poller's registrations: %w", err)
	}
	out := make([]*Interest, len(fds))
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[0] != "tfd:" || f[2] != "events:" || f[4] != "data:" {
			continue
		}
		tfd, err1 := strconv.Atoi(f[1])
		ev, err2 := strconv.ParseUint(f[3], 16, 32)
		data, err3 := strconv.ParseUint(f[5], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		for i, fd := range fds {
			if fd == tfd && ev&(unix.EPOLLOUT|unix.EPOLLET) == unix.EPOLLOUT|unix.EPOLLET {
				out[i] = &Interest{epfd: epfd, fd: fd, events: uint32(ev), data: data}
			}
		}
	}
	return out, nil
}

// MuteWrites removes the write interest (EPOLL_CTL_MOD with the
// registration's events less EPOLLOUT, same data); read, hang-up and
// error events are reported as before.
func (r *Interest) MuteWrites() error {
	if r.muted {
		return nil
	}
	if err := r.modify(r.events &^ unix.EPOLLOUT); err != nil {
		return err
	}
	r.muted = true
	return nil
}

// RestoreWrites puts the runtime's registration back, to be called
// before waiting for room to write; with edge triggering the kernel
// reports the socket at once when it is writable by then.
func (r *Interest) RestoreWrites() error {
	if !r.muted {
		return nil
	}
	if err := r.modify(r.events); err != nil {
		return err
	}
	r.muted = false
	return nil
}

// Muted reports whether the write interest is off.
func (r *Interest) Muted() bool { return r.muted }

func (r *Interest) modify(events uint32) error {
	// x/sys splits epoll_event's 64-bit data into Fd and Pad (little
	// endian on the architectures this file builds for).
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(r.data)), Pad: int32(uint32(r.data >> 32))}
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_MOD, r.fd, &ev); err != nil {
		return fmt.Errorf("rawsock: epoll_ctl MOD fd %d: %w", r.fd, err)
	}
	return nil
}
