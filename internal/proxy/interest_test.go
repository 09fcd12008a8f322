package proxy

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/rawsock"
)

// The relay mutes the runtime poller's write interest on both connections
// of a session and restores it while a write waits for room: a 16 MB
// result to a client with a 4 KB receive buffer and a 16 MB parameter
// both arrive whole, and afterwards the kernel's listing of the poller's
// registrations shows both descriptors without EPOLLOUT (and still with
// EPOLLIN and EPOLLRDHUP).
func TestMutedWriteInterest(t *testing.T) {
	ctx := context.Background()
	p, addr := startProxy(t, false)
	cfg, err := pgx.ParseConfig(viaProxy(t, srv.DSN(t, "postgres"), addr))
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	}}
	cfg.DialFunc = d.DialContext
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var big string
	if err := conn.QueryRow(ctx, "SELECT repeat('x', 16*1024*1024)").Scan(&big); err != nil || len(big) != 16<<20 {
		t.Fatalf("16 MB result: %d bytes, %v", len(big), err)
	}
	var n int
	param := strings.Repeat("y", 16<<20)
	if err := conn.QueryRow(ctx, "SELECT length($1::text)", param).Scan(&n); err != nil || n != len(param) {
		t.Fatalf("16 MB parameter: length %d, %v", n, err)
	}
	// A small round trip: the mutes after the large writes are done.
	if err := conn.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("select: %d, %v", n, err)
	}
	if !rawsock.Supported || rawsock.RuntimePoller() < 0 {
		t.Skip("no runtime poller to inspect on this platform")
	}
	p.mu.Lock()
	var ss []*session
	for s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	if len(ss) != 1 {
		t.Fatalf("%d sessions, want 1", len(ss))
	}
	listing, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(rawsock.RuntimePoller()))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]net.Conn{"client": ss[0].client, "upstream": ss[0].up} {
		var fd int
		if err := rawsock.RawConnOf(c).Control(func(f uintptr) { fd = int(f) }); err != nil {
			t.Fatal(err)
		}
		ev, ok := registeredEvents(string(listing), fd)
		if !ok {
			t.Fatalf("%s fd %d not in the poller's listing:\n%s", name, fd, listing)
		}
		if ev&unix.EPOLLOUT != 0 || ev&(unix.EPOLLIN|unix.EPOLLRDHUP) != unix.EPOLLIN|unix.EPOLLRDHUP {
			t.Errorf("%s fd %d registered for events %#x, want EPOLLIN|EPOLLRDHUP without EPOLLOUT", name, fd, ev)
		}
	}
}

// registeredEvents finds fd's events in an eventpoll fdinfo listing.
func registeredEvents(listing string, fd int) (uint32, bool) {
	for _, line := range strings.Split(listing, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "tfd:" && f[1] == strconv.Itoa(fd) && f[2] == "events:" {
			ev, err := strconv.ParseUint(f[3], 16, 32)
			return uint32(ev), err == nil
		}
	}
	return 0, false
}
