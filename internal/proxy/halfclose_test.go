package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"golang.org/x/sys/unix"

	"github.com/erplab/erplab/internal/rewrite"
)

// serveUnwatched serves ln with p's sessions (Proxy.handle) without
// Serve's warm-up: each session ends by itself, when a relay loop reads
// its peer's close.
func serveUnwatched(t *testing.T, p *Proxy, ln net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.handle(ctx, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		cancel()
		wg.Wait()
		p.wg.Wait()
		p.closeSides()
	})
}

// unwatchedProxy is a proxy in front of upstream served by
// serveUnwatched, and its address.
func unwatchedProxy(t *testing.T, upstream string) (*Proxy, string) {
	t.Helper()
	p, err := New(Config{Upstream: upstream})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveUnwatched(t, p, ln)
	return p, ln.Addr().String()
}

// smallSendBuffer is a Proxy.wrapUp that gives each upstream connection
// a send buffer of 16 KiB (no autotuning): what the server does not read
// then stays with the relay.
func smallSendBuffer(t *testing.T) func(net.Conn) net.Conn {
	return func(c net.Conn) net.Conn {
		sc, ok := c.(syscall.Conn)
		if !ok {
			t.Error("upstream connection without a descriptor")
			return c
		}
		rc, err := sc.SyscallConn()
		if err == nil {
			cerr := rc.Control(func(fd uintptr) {
				err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10)
			})
			err = errors.Join(err, cerr)
		}
		if err != nil {
			t.Errorf("SO_SNDBUF: %v", err)
		}
		return c
	}
}

// readToEOF reads c until EOF (10 s liveness bound) and returns the
// backend messages' types in order, DataRow messages counted in rows
// instead, and the bytes after the last whole message.
func readToEOF(t *testing.T, c net.Conn) (types string, rows int, rest []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("no EOF: read %d bytes, then %v", len(b), err)
	}
	var ts []byte
	for len(b) >= 5 {
		size := 1 + int(binary.BigEndian.Uint32(b[1:5]))
		if size < 5 || len(b) < size {
			break
		}
		if b[0] == 'D' {
			rows++
		} else {
			ts = append(ts, b[0])
		}
		b = b[size:]
	}
	return string(ts), rows, b
}

// closeWrite shuts down c's write side (a TCP or Unix connection).
func closeWrite(t *testing.T, c net.Conn) {
	t.Helper()
	hc, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T cannot half-close", c)
	}
	if err := hc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits until backend pid has ended (20 s liveness bound).
// waitLockWait waits until backend pid waits for a lock (its query
// blocked behind one another session holds).
func waitLockWait(t *testing.T, direct interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, pid uint32) {
	t.Helper()
	var n int
	for i := 0; i < 600; i++ {
		if err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", int(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("backend %d never waited for a lock", pid)
}

func waitGone(t *testing.T, direct interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, pid uint32) {
	t.Helper()
	var n int
	for i := 0; i < 200; i++ {
		if err := direct.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("backend %d still there", pid)
}

// The relay's next read sees a client's half-close, whatever readiness
// event brought its FIN: without the hang-up watcher, a client that sends
// a Query and half-closes at once gets the answer and EOF, every time.
// (The relay that waited for the poller after a short read missed a FIN
// that came with the request and left the client waiting for the
// watcher.)
func TestClientHalfCloseSeenByRelay(t *testing.T) {
	dsn, direct := setup(t)
	query := encode(t, &pgproto3.Query{String: "SELECT 1"})
	_, addr := unwatchedProxy(t, upstreamVia(t, dsn, "unix"))
	cfg := plainConfig(t, dsn, addr)
	for i := 0; i < 20; i++ {
		pid, conn := hijackedConfig(t, cfg)
		if _, err := conn.Write(query); err != nil {
			t.Fatal(err)
		}
		closeWrite(t, conn)
		types, rows, rest := readToEOF(t, conn)
		conn.Close()
		if types != "TCZ" || rows != 1 || len(rest) != 0 {
			t.Fatalf("try %d: read %q, %d rows, %d bytes more; want \"TCZ\", 1 row", i, types, rows, len(rest))
		}
		waitGone(t, direct, pid)
	}
}

// A client that half-closes after its last request and keeps reading
// gets its answer, as on a direct connection: the rows, CommandComplete
// and ReadyForQuery, then EOF once the server, having seen the EOF
// passed on, ended the backend. Query then Terminate in one write, and
// Terminate then a half-close, end the session as well, with the same
// answers. After a Terminate the proxy runs without its hang-up
// watcher: the session ends by itself. (The relay's next read sees a
// half-close, whatever readiness event brought its FIN.)
func TestClientHalfClose(t *testing.T) {
	dsn, direct := setup(t)
	query := encode(t, &pgproto3.Query{String: "SELECT g FROM generate_series(1, 5000) g"})
	terminate := encode(t, &pgproto3.Terminate{})
	directCfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	directCfg.TLSConfig, directCfg.Fallbacks = nil, nil
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			up := upstreamVia(t, dsn, network)
			for _, c := range []struct {
				name    string
				send    []byte
				half    bool
				watched bool
				types   string
				rows    int
			}{
				{"half-close", query, true, true, "TCZ", 5000},
				{"query-terminate", append(append([]byte(nil), query...), terminate...), false, false, "TCZ", 5000},
				{"terminate-half-close", terminate, true, false, "", 0},
			} {
				t.Run(c.name, func(t *testing.T) {
					var p *Proxy
					var addr string
					if c.watched {
						p, addr = startProxyConfig(t, Config{Upstream: up}, false)
					} else {
						p, addr = unwatchedProxy(t, up)
					}
					for _, via := range []string{"direct", "proxy"} {
						cfg := directCfg
						if via == "proxy" {
							cfg = plainConfig(t, dsn, addr)
						}
						pid, conn := hijackedConfig(t, cfg)
						defer conn.Close()
						if _, err := conn.Write(c.send); err != nil {
							t.Fatal(err)
						}
						if c.half {
							closeWrite(t, conn)
						}
						types, rows, rest := readToEOF(t, conn)
						if types != c.types || rows != c.rows || len(rest) != 0 {
							t.Errorf("%s: read %q, %d rows, %d bytes more; want %q, %d rows", via, types, rows, len(rest), c.types, c.rows)
						}
						waitGone(t, direct, pid)
					}
					for i := 0; ; i++ { // the proxy's session ends with the server's
						p.mu.Lock()
						n := len(p.sessions)
						p.mu.Unlock()
						if n == 0 {
							break
						}
						if i == 200 {
							t.Fatalf("%d sessions left", n)
						}
						time.Sleep(100 * time.Millisecond)
					}
				})
			}
		})
	}
}

// truncatedLog returns the server log's lines after offset from that
// mention "incomplete message" or "unexpected EOF", and the log's size.
func truncatedLog(t *testing.T, offset int64) ([]string, int64) {
	t.Helper()
	b, err := os.ReadFile(srv.Cluster(t).LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	var out []string
	for _, l := range strings.Split(string(b[offset:]), "\n") {
		if strings.Contains(l, "incomplete message") || strings.Contains(l, "unexpected EOF") {
			// without the timestamp and PID prefix
			if i := strings.Index(l, "LOG:"); i >= 0 {
				l = l[i:]
			}
			out = append(out, l)
		}
	}
	return out, int64(len(b))
}

// A message the client only partly sent when it closes reaches the
// server as it is: the server logs the same truncated-message complaint
// as for a direct connection, for a cut inside the length word and
// inside the body, with the client half-closed or closed.
func TestPartialMessageAtEOF(t *testing.T) {
	dsn, direct := setup(t)
	query := encode(t, &pgproto3.Query{String: "SELECT 'partial-message-at-eof'"})
	directCfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	directCfg.TLSConfig, directCfg.Fallbacks = nil, nil
	_, addr := unwatchedProxy(t, dsn)
	for _, cut := range []int{3, len(query) - 4} {
		for _, half := range []bool{true, false} {
			t.Run(fmt.Sprintf("cut%d-half%v", cut, half), func(t *testing.T) {
				var logs [2][]string
				for i, via := range []string{"direct", "proxy"} {
					cfg := directCfg
					if via == "proxy" {
						cfg = plainConfig(t, dsn, addr)
					}
					_, offset := truncatedLog(t, 0)
					pid, conn := hijackedConfig(t, cfg)
					if _, err := conn.Write(query[:cut]); err != nil {
						t.Fatal(err)
					}
					if half {
						closeWrite(t, conn)
						types, rows, rest := readToEOF(t, conn)
						if types != "" || rows != 0 || len(rest) != 0 {
							t.Errorf("%s: read %q, %d rows, %d bytes; want nothing then EOF", via, types, rows, len(rest))
						}
					}
					conn.Close()
					waitGone(t, direct, pid)
					for j := 0; j < 100; j++ { // the log line is written as the backend exits
						if logs[i], _ = truncatedLog(t, offset); len(logs[i]) > 0 {
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
				if len(logs[0]) == 0 {
					t.Fatal("the server logged nothing for the direct connection")
				}
				t.Logf("server log, both ways: %q", logs[0])
				if strings.Join(logs[0], "\n") != strings.Join(logs[1], "\n") {
					t.Errorf("server log: direct %q, through the proxy %q", logs[0], logs[1])
				}
			})
		}
	}
}

// A client's close does not lose its last bytes, read by the relay but
// not yet written upstream (the mirror of TestHangupAfterUnrelayedBytes):
// the client sends a Query the server does not read yet (its backend
// waits for an advisory lock the test holds) and a 1 MiB INSERT (the
// longest text the relay gathers whole: a longer one is relayed as it
// arrives, see streamClient), more than the sockets hold (the proxy's
// send buffer upstream made small), then closes while the relay waits
// to write the rest. Every byte reaches the server: the row is
// inserted, whole; the session counts one hang-up. (The hang-up watcher
// that looked at sockets with recv(MSG_PEEK) once closed such sessions.)
func TestHangupAfterUnwrittenClientBytes(t *testing.T) {
	ctx := context.Background()
	dsn, direct := setup(t)
	if _, err := direct.Exec(ctx, "CREATE TABLE big (v text)"); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	const insert = "INSERT INTO big VALUES ('')"
	const size = rewrite.MaxBytes - len(insert)
	value := strings.Repeat("x", size-1) + "y"
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			if _, err := direct.Exec(ctx, "TRUNCATE big"); err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
				t.Fatal(err)
			}
			locked := true
			defer func() {
				if locked {
					_, _ = holder.Exec(ctx, "SELECT pg_advisory_unlock(4242)")
				}
			}()
			p, err := New(Config{Upstream: upstreamVia(t, dsn, network)})
			if err != nil {
				t.Fatal(err)
			}
			p.wrapUp = smallSendBuffer(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			serveUnwatched(t, p, ln)
			pid, conn := hijackedConfig(t, plainConfig(t, dsn, ln.Addr().String()))
			defer conn.Close()
			hangups := p.Stats().Hangups
			msgs := encode(t, &pgproto3.Query{String: "SELECT pg_advisory_lock(4242)"},
				&pgproto3.Query{String: insert[:len(insert)-2] + value + "')"})
			if _, err := conn.Write(msgs); err != nil {
				t.Fatal(err)
			}
			conn.Close()
			waitLockWait(t, direct, pid) // the relay holds the INSERT it cannot write yet
			if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
				t.Fatal(err)
			}
			locked = false
			waitGone(t, direct, pid)
			if h := p.Stats().Hangups - hangups; h != 1 {
				t.Errorf("%d hang-ups counted, want 1 (the client closed without a Terminate)", h)
			}
			var n int
			var last string
			if err := direct.QueryRow(ctx, "SELECT coalesce(sum(length(v)), 0), coalesce(max(right(v, 1)), '') FROM big").Scan(&n, &last); err != nil {
				t.Fatal(err)
			}
			if n != size || last != "y" {
				t.Errorf("the server stored %d bytes ending %q, want %d ending \"y\"", n, last, size)
			}
		})
	}
}
