package pgbench

import (
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"
)

// One failed attempt in libpq's words: a name that does not resolve, a
// refused connection to a host name (its address in parentheses).
func TestAttemptMessage(t *testing.T) {
	cfg := &pgconn.Config{Host: "db2", Port: 5433}
	dns := fmt.Errorf("hostname resolving error: %w", &net.DNSError{Err: "no such host", Name: "db2", IsNotFound: true})
	if got, want := attemptMessage(cfg, dns), `could not translate host name "db2" to address: Name or service not known`; got != want {
		t.Errorf("DNS: %q, want %q", got, want)
	}
	refused := fmt.Errorf("10.0.0.5:5433 (db2): dial error: %w", &net.OpError{Op: "dial", Net: "tcp",
		Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 5433}, Err: fmt.Errorf("connect: %w", unix.ECONNREFUSED)})
	want := "connection to server at \"db2\" (10.0.0.5), port 5433 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?"
	if got := attemptMessage(cfg, refused); got != want {
		t.Errorf("refused: %q, want %q", got, want)
	}
}
