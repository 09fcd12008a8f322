package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// fuzzProxy starts the proxy the fuzz targets feed, in front of the test
// cluster (trust over its Unix socket), with a 1 MiB message limit.
func fuzzProxy(f *testing.F) (*Proxy, string) {
	return startProxyConfig(f, Config{Upstream: srv.DSN(f, "postgres"), MaxMessageSize: 1 << 20}, false)
}

// feed writes in to c, half-closes it and reads until the proxy closes:
// the proxy must end the connection within 10 s of the client's EOF,
// and then stop serving it (no session left behind).
func feed(t *testing.T, p *Proxy, c net.Conn, in []byte) {
	t.Helper()
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write(in) // the proxy may close first
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the proxy did not close the connection 10 s after the client's EOF")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still served 10 s after the client left", p.active.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// FuzzStartup feeds arbitrary bytes as a client's first bytes (startup
// packets, SSL/GSS/cancel requests, authentication replies) to a proxy
// in front of a real server. Seeds: testdata/fuzz/FuzzStartup.
func FuzzStartup(f *testing.F) {
	p, addr := fuzzProxy(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		feed(t, p, c, in)
	})
}

// FuzzFraming feeds arbitrary bytes as the messages of an authenticated
// session (Query, Parse, Bind, COPY data, Terminate, broken lengths...)
// to a proxy in front of a real server. Seeds: testdata/fuzz/FuzzFraming.
func FuzzFraming(f *testing.F) {
	p, addr := fuzzProxy(f)
	startup := startupPacket(3, 0, "user", "postgres", "database", "postgres")
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(startup); err != nil {
			t.Fatal(err)
		}
		fe := pgproto3.NewFrontend(c, c)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			m, err := fe.Receive()
			if err != nil {
				t.Fatalf("login through the proxy: %v", err)
			}
			if _, ok := m.(*pgproto3.ReadyForQuery); ok {
				break
			}
		}
		feed(t, p, c, in)
	})
}

func TestFuzzSeedsExist(t *testing.T) {
	for _, d := range []string{"testdata/fuzz/FuzzStartup", "testdata/fuzz/FuzzFraming"} {
		if es, err := os.ReadDir(d); err != nil || len(es) < 5 {
			t.Errorf("%s: %d seeds, %v", d, len(es), err)
		}
	}
}
