package proxy

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// rawClient is a PostgreSQL session driven with pre-encoded messages and
// one fixed read buffer, so that the client side allocates nothing per
// round trip.
type rawClient struct {
	c   net.Conn
	buf []byte
}

// dialRaw opens a trust-authenticated session as user postgres on
// database postgres over network/addr.
func dialRaw(tb testing.TB, network, addr string) *rawClient {
	tb.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	startup, err := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": "postgres", "database": "postgres"}}).Encode(nil)
	if err != nil {
		tb.Fatal(err)
	}
	rc := &rawClient{c: c, buf: make([]byte, 64*1024)}
	if _, err := rc.roundTrip(startup); err != nil {
		tb.Fatal(err)
	}
	return rc
}

// roundTrip sends msg and reads up to ReadyForQuery; it returns the
// number of DataRow messages, or an error for an ErrorResponse.
func (rc *rawClient) roundTrip(msg []byte) (int, error) {
	if _, err := rc.c.Write(msg); err != nil {
		return 0, err
	}
	rows, n := 0, 0
	for {
		m, err := rc.c.Read(rc.buf[n:])
		if err != nil {
			return rows, err
		}
		n += m
		at := 0
		for n-at >= 5 {
			size := int(binary.BigEndian.Uint32(rc.buf[at+1:at+5])) + 1
			if size > len(rc.buf) {
				return rows, fmt.Errorf("message of %d bytes", size)
			}
			if n-at < size {
				break
			}
			switch rc.buf[at] {
			case 'D':
				rows++
			case 'E':
				return rows, fmt.Errorf("server error: %q", rc.buf[at+5:at+size])
			case 'Z':
				return rows, nil
			}
			at += size
		}
		n = copy(rc.buf, rc.buf[at:n])
	}
}

// encode concatenates encoded frontend messages.
func encode(tb testing.TB, msgs ...pgproto3.FrontendMessage) []byte {
	tb.Helper()
	var out []byte
	for _, m := range msgs {
		var err error
		if out, err = m.Encode(out); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// relayRequests are a simple-protocol query and an execution of a
// prepared statement (prepare it with relayPrepare first), each
// returning 3 rows.
func relayRequests(tb testing.TB) (simple, prepared, prepare []byte) {
	const q = "SELECT g FROM generate_series(1, 3) g"
	simple = encode(tb, &pgproto3.Query{String: q})
	prepare = encode(tb, &pgproto3.Parse{Name: "s1", Query: q}, &pgproto3.Sync{})
	prepared = encode(tb, &pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	return simple, prepared, prepare
}

// The relay allocates nothing per relayed message: round trips through
// the proxy (simple protocol, prepared statement) cost the whole process
// (client, proxy goroutines) less than one allocation on average.
func TestRelayAllocations(t *testing.T) {
	_, addr := startProxy(t, false)
	rc := dialRaw(t, "tcp", addr)
	simple, prepared, prepare := relayRequests(t)
	if _, err := rc.roundTrip(prepare); err != nil {
		t.Fatal(err)
	}
	for name, msg := range map[string][]byte{"simple": simple, "prepared": prepared} {
		for range 20 { // warm up: buffers, statement cache
			if rows, err := rc.roundTrip(msg); err != nil || rows != 3 {
				t.Fatalf("%s: %d rows, %v", name, rows, err)
			}
		}
		var failed error
		allocs := testing.AllocsPerRun(500, func() {
			if rows, err := rc.roundTrip(msg); (err != nil || rows != 3) && failed == nil {
				failed = fmt.Errorf("%d rows, %v", rows, err)
			}
		})
		if failed != nil {
			t.Fatalf("%s: %v", name, failed)
		}
		if allocs >= 1 {
			t.Errorf("%s: %.1f allocations per round trip, want 0", name, allocs)
		}
	}
}

// BenchmarkRelayRoundTrip measures one round trip (3 rows) directly on
// the server's unix socket and through the proxy (client over TCP,
// upstream on the unix socket); the difference is what the proxy and
// the TCP hop add.
func BenchmarkRelayRoundTrip(b *testing.B) {
	cfg, err := pgconn.ParseConfig(srv.DSN(b, "postgres"))
	if err != nil {
		b.Fatal(err)
	}
	_, addr := startProxy(b, false)
	simple, prepared, prepare := relayRequests(b)
	for _, target := range []struct{ name, network, addr string }{
		{"direct", "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)},
		{"proxy", "tcp", addr},
	} {
		for _, req := range []struct {
			name string
			msg  []byte
		}{{"simple", simple}, {"prepared", prepared}} {
			b.Run(target.name+"/"+req.name, func(b *testing.B) {
				rc := dialRaw(b, target.network, target.addr)
				if _, err := rc.roundTrip(prepare); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := rc.roundTrip(req.msg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
