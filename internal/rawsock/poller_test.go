package rawsock_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/rawsock"
)

// MuteWrites and RestoreWrites change what the kernel lists for a Unix
// socket in the runtime poller (events without, then with, EPOLLOUT; the
// same data), and a muted socket still reads.
func TestInterestMuteRestore(t *testing.T) {
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	epfd := rawsock.RuntimePoller()
	if epfd < 0 {
		t.Skip("no runtime poller found on this platform")
	}
	line := func(fd int) string {
		l, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(epfd))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range strings.Split(string(l), "\n") {
			if f := strings.Fields(s); len(f) >= 6 && f[0] == "tfd:" && f[1] == strconv.Itoa(fd) {
				return f[3] + " " + f[5]
			}
		}
		t.Fatalf("fd %d not registered", fd)
		return ""
	}
	rc := rawsock.RawConnOf(a)
	err = rc.Control(func(u uintptr) {
		fd := int(u)
		before := line(fd)
		in, err := rawsock.FindInterests(epfd, fd, -1)
		if err != nil || in[0] == nil || in[1] != nil {
			t.Fatalf("FindInterests: %v, %v", in, err)
		}
		if err := in[0].MuteWrites(); err != nil || !in[0].Muted() {
			t.Fatal(err)
		}
		ev, _ := strconv.ParseUint(strings.Fields(before)[0], 16, 32)
		want := strconv.FormatUint(ev&^unix.EPOLLOUT, 16) + " " + strings.Fields(before)[1]
		if got := line(fd); got != want {
			t.Errorf("muted: %q, want %q (before %q)", got, want, before)
		}
		if err := in[0].RestoreWrites(); err != nil || in[0].Muted() {
			t.Fatal(err)
		}
		if got := line(fd); got != before {
			t.Errorf("restored: %q, want %q", got, before)
		}
		_ = in[0].MuteWrites()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if n, err := a.Read(buf); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("read on a muted socket: %q, %v", buf[:n], err)
	}
}
