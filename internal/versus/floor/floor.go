//go:build linux

package floor

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// wakeMs is the loop's longest wait in epoll_pwait (ms): how soon it sees
// Close, lets the scheduler's sysmon see it make progress (no preemption
// signal every 10 ms) and lets a stop-the-world find it.
const wakeMs = 5

// bufSize is the relay buffer in bytes, shared by every connection (the
// loop handles one event at a time).
const bufSize = 64 * 1024

// writeWaitMs bounds how long the loop waits for room to write to one
// side (ms); a side that takes no bytes for that long ends its pair.
const writeWaitMs = 1000

// Relay is a running floor relay. Start makes one; Close stops it.
type Relay struct {
	ln   net.Listener
	dial func() (net.Conn, error)
	epfd int
	stop atomic.Bool

	mu    sync.Mutex
	pairs map[int]int // every open descriptor and its peer

	accepted sync.WaitGroup
	looped   chan struct{}
	closed   sync.Once
}

// Start listens on 127.0.0.1 (a port the kernel picks), relays every
// accepted connection to a new connection from dial, and raises
// GOMAXPROCS by one for the loop's thread until Close. Errors: the
// listener or the epoll instance cannot be made.
func Start(dial func() (net.Conn, error)) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("floor: listen: %w", err)
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("floor: epoll_create1: %w", err)
	}
	r := &Relay{ln: ln, dial: dial, epfd: epfd, pairs: map[int]int{}, looped: make(chan struct{})}
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	go r.loop()
	r.accepted.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the address clients connect to.
func (r *Relay) Addr() *net.TCPAddr { return r.ln.Addr().(*net.TCPAddr) }

// Close stops accepting, ends the loop, closes every relayed connection
// and lowers GOMAXPROCS by the one Start added. It returns nil; a second call does nothing.
func (r *Relay) Close() error {
	r.closed.Do(func() {
		r.ln.Close()
		r.accepted.Wait()
		r.stop.Store(true)
		<-r.looped
		r.mu.Lock()
		for fd := range r.pairs {
			unix.Close(fd)
		}
		r.pairs = map[int]int{}
		r.mu.Unlock()
		unix.Close(r.epfd)
		runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0)-1, 1))
	})
	return nil
}

// accept takes clients until the listener is closed. Each client and
// its upstream connection leave package net (their descriptors are
// duplicated and the net.Conns closed, which removes them from the
// runtime's poller) and join the loop's epoll set, each registration
// carrying the descriptor and its peer.
func (r *Relay) accept() {
	defer r.accepted.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		u, err := r.dial()
		if err != nil {
			c.Close()
			continue
		}
		cfd, err1 := detach(c)
		ufd, err2 := detach(u)
		if err1 != nil || err2 != nil {
			closeFd(cfd)
			closeFd(ufd)
			continue
		}
		r.mu.Lock()
		r.pairs[cfd], r.pairs[ufd] = ufd, cfd
		r.mu.Unlock()
		if r.register(cfd, ufd) != nil || r.register(ufd, cfd) != nil {
			r.end(cfd, ufd)
		}
	}
}

// detach returns a non-blocking duplicate of c's descriptor and closes
// c; -1 and an error when c has none.
func detach(c net.Conn) (int, error) {
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, errors.New("floor: connection without a descriptor")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func closeFd(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// register adds fd to the loop's set, level-triggered for input, its
// event data holding fd (low 32 bits) and peer (high 32 bits).
func (r *Relay) register(fd, peer int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd), Pad: int32(peer)}
	return unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
}

// end closes a pair (both removed from the set first); false when the
// pair was already closed.
func (r *Relay) end(fd, peer int) bool {
	r.mu.Lock()
	p, ok := r.pairs[fd]
	if !ok || p != peer {
		r.mu.Unlock()
		return false
	}
	delete(r.pairs, fd)
	delete(r.pairs, peer)
	r.mu.Unlock()
	_ = unix.EpollCtl(r.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	_ = unix.EpollCtl(r.epfd, unix.EPOLL_CTL_DEL, peer, nil)
	unix.Close(fd)
	unix.Close(peer)
	return true
}

// loop is the relay: one locked OS thread in epoll_pwait, recv and send
// through syscall.RawSyscall6, so the Go scheduler never parks or wakes
// anything while bytes flow (the thread holds its P throughout; Start
// added one for it).
func (r *Relay) loop() {
	defer close(r.looped)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	evs := make([]unix.EpollEvent, 128)
	buf := make([]byte, bufSize)
	var ended []int // descriptors closed during the current batch
	for !r.stop.Load() {
		n, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(r.epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), wakeMs, 0, 0)
		if errno == unix.EINTR || n == 0 {
			runtime.Gosched() // a stop-the-world or preemption request is served here
			continue
		}
		if errno != 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		ended = ended[:0]
		for _, ev := range evs[:n] {
			fd, peer := int(ev.Fd), int(ev.Pad)
			if slices.Contains(ended, fd) {
				continue // its pair ended earlier in this batch: the number may be reused
			}
			if !r.relay(fd, peer, buf) && r.end(fd, peer) {
				ended = append(ended, fd, peer)
			}
		}
	}
}

// relay moves what fd has to peer: one recv, then send until all is
// written (waiting in poll for room, at most writeWaitMs). False when
// the pair is to end: end of stream, an error, or a stuck peer.
func (r *Relay) relay(fd, peer int, buf []byte) bool {
	var got uintptr
	for {
		var errno syscall.Errno
		got, _, errno = syscall.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return true
		default:
			return false
		}
		break
	}
	if got == 0 {
		return false
	}
	out := buf[:got]
	for len(out) > 0 {
		w, _, errno := syscall.RawSyscall6(unix.SYS_SENDTO, uintptr(peer), uintptr(unsafe.Pointer(&out[0])), uintptr(len(out)), unix.MSG_NOSIGNAL, 0, 0)
		switch errno {
		case 0:
			out = out[w:]
		case unix.EINTR:
		case unix.EAGAIN:
			pfd := []unix.PollFd{{Fd: int32(peer), Events: unix.POLLOUT}}
			if k, err := unix.Poll(pfd, writeWaitMs); err != nil && err != unix.EINTR || k == 0 && err == nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}
