// Package floor is the cheapest relay a Go process can run between
// PostgreSQL clients and a server, the floor against which 'erplab proxy
// bench --floor' reads erplab's proxy and PgBouncer: it relays bytes and
// nothing else (no message framing, no rewriting, no authentication
// relay of its own: the bytes of the startup and authentication pass
// through like any other).
//
// Its design is an event loop like PgBouncer's (libevent): one locked OS
// thread waits in epoll_pwait for every relayed socket, then per ready
// socket makes one recv and the sends that write it to the peer, through
// syscall.RawSyscall6 so that the Go scheduler never parks or wakes a
// goroutine while bytes flow. Per pgbench -S transaction that is the
// system calls and context switches PgBouncer makes (2 epoll_pwait, 2
// recvfrom, 2 sendto and 2 context switches at 1 client), where
// erplab's proxy, two goroutines per session in Go's netpoller, adds
// the scheduler's non-blocking epoll_pwait before each park (about 8
// system calls per transaction). What the floor carries relative to
// PgBouncer on a machine is what that design carries there without a
// proxy's protocol work (not a bound for every Go relay: one making
// fewer system calls, with splice(2) say, could carry more), and what
// erplab's proxy carries relative to the floor is the cost of its
// protocol handling and of its goroutines in Go's scheduler.
//
// The loop holds its P (GOMAXPROCS is raised by one while a Relay runs
// and restored by Close); it waits at most 5 ms at a time, so Close,
// sysmon and a stop-the-world see it progress. A side that takes no
// bytes for a second ends its pair; a side's close or error ends both.
// It is a measuring instrument, not a proxy: no TLS, no limits, no
// half-close, no cancel requests of its own (they are relayed like any
// connection, to the server).
//
// Linux only; elsewhere Start returns ErrUnsupported.
package floor
