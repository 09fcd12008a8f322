package proxy

import (
	"context"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hangupPeriod is how often watchHangups looks at every session.
const hangupPeriod = 2 * time.Second

// watchHangups looks, every hangupPeriod until ctx is done, for the
// sessions whose client or upstream has closed its side and counts them
// (Stats.Hangups). A relay loop reads with the connection's own Read, so
// it sees such a close as the EOF of its next read; the look also ends
// that read at once when the loop gets to it, e.g. after a write that
// waited for a full socket. A client's close found so is handled as one
// its loop read (session.clientEOF: the session goes on until the server
// closes). See checkHangups.
func (p *Proxy) watchHangups(ctx context.Context) {
	t := time.NewTicker(hangupPeriod)
	defer t.Stop()
	var ss []*session
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ss = p.lookForHangups(ss)
	}
}

// lookForHangups is one look of watchHangups (checkHangups) with ss, a
// buffer reused between looks, cleared after the look: it kept, for the
// proxy's life, as many ended sessions as the most it had seen at once,
// with what they held.
func (p *Proxy) lookForHangups(ss []*session) []*session {
	ss = p.checkHangups(ss[:0])
	clear(ss)
	return ss
}

// checkHangups is one look of watchHangups at every session; it appends
// them to ss and returns it (a buffer reused between looks). The look is
// one recv(MSG_PEEK|MSG_DONTWAIT) per connection, which consumes nothing.
//
// A hung-up connection's read deadline is set in the past, which wakes
// the loop reading it, instead of closing the session: that loop ends
// the session itself once it has relayed what it read (a waiting Read
// returns the deadline error; a handler's write in progress finishes).
// "Nothing left to read" is about the kernel's queue only: the loop may
// hold the peer's last bytes, read but not yet written, e.g. while the
// other side's socket is full, and closing the session then lost them
// (the upstream's last data, a FATAL). Each session's hang-up is counted once. A client whose EOF the
// session already handles (session.clientDone: it waits for the server's
// close) is not looked at.
func (p *Proxy) checkHangups(ss []*session) []*session {
	p.mu.Lock()
	for s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	for _, s := range ss {
		found := false
		for i, c := range [2]net.Conn{s.client, s.up} {
			if i == 0 && s.clientDone.Load() {
				continue
			}
			if hungUp(c) {
				found = true
				_ = c.SetReadDeadline(time.Unix(1, 0))
			}
		}
		if found && !s.hungUp.Swap(true) {
			p.stats.hangups.Add(1)
		}
	}
	return ss
}

// hungUp reports whether c's peer has closed its side and nothing is
// left to read; false for a connection without a file descriptor (its
// reads see the end of the stream themselves). The look is a
// recv(MSG_PEEK|MSG_DONTWAIT) on the socket, which consumes nothing.
func hungUp(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	eof := false
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		eof = n == 0 && err == nil
	})
	return eof
}
