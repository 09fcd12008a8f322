package proxy

import (
	"context"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/rawsock"
)

// hangupPeriod is how often watchHangups looks at every session.
const hangupPeriod = 2 * time.Second

// watchHangups closes, every hangupPeriod until ctx is done, the
// sessions whose client or upstream has closed its side while the
// session waited for data. inbound.run waits for the poller after a
// short read; when the peer's FIN came in the same readiness event as
// its last bytes, no further event comes and the session would wait for
// TCP keepalive, or forever for a peer that half-closed and still reads
// (an upstream's FATAL is handled at once, see inbound.more). The look
// is one recv(MSG_PEEK|MSG_DONTWAIT) per connection, which consumes
// nothing.
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
		ss = ss[:0]
		p.mu.Lock()
		for s := range p.sessions {
			ss = append(ss, s)
		}
		p.mu.Unlock()
		for _, s := range ss {
			if hungUp(s.client) || hungUp(s.up) {
				p.stats.hangups.Add(1)
				s.close()
			}
		}
	}
}

// hungUp reports whether c's peer has closed its side and nothing is
// left to read; false for a connection without a file descriptor (its
// reads see the end of the stream themselves).
func hungUp(c net.Conn) bool {
	rc := rawsock.RawConnOf(c)
	if rc == nil {
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
