// Package proxy is a transparent PostgreSQL wire-protocol proxy in session
// mode (one upstream connection per client) that rewrites the SQL text of
// Query and Parse messages with package rewrite and relays every other
// message byte for byte (protocol: https://www.postgresql.org/docs/current/protocol.html).
//
// It answers SSLRequest and GSSENCRequest with "N" (no TLS), relays
// authentication untouched (trust, md5, SCRAM-SHA-256 without channel
// binding) under PostgreSQL's own pre-authentication limits (startup.go),
// routes CancelRequest to the upstream server when the key belongs to one
// of its sessions, and never injects or reorders messages. Nothing is
// rewritten and no side connection is opened before the upstream sent
// AuthenticationOk. A startup packet it does not take (an unsupported
// protocol version) gets the upstream's own answer.
//
// No client can take it down: statements too large or deep for the C
// parser are relayed unparsed (rewrite.CheckLimits); a message over its
// limit (Config.MaxMessageSize after authentication) is not read: the
// client gets FATAL 54000 naming the limit and is disconnected (before
// authentication: PostgreSQL's limits, a silent close as PostgreSQL's),
// buffers grow only as bytes arrive and are dropped once the message is
// relayed, and messages the proxy need not see whole (DataRow, CopyData,
// Bind, a Query or Parse too large to parse) are relayed as they arrive
// (streamMin, stream.go); a client message of a
// type PostgreSQL does not know goes to the server as its type byte
// after the messages before it, which it answers before its own FATAL
// 08P01 (session.refuseType), one of a length it refuses gets the
// proxy's FATAL 08P01 at once (frontendLimit); Config.MaxClients bounds the
// connections served (53300 above); accept errors are retried with
// back-off; the server's close ends its session at once (the relay's
// next read sees it; Stats.Hangups counts it); the client's (EOF or Terminate) is passed upstream as a
// half-close after every byte read from it, and the session ends when the
// server closes, once its answers are relayed (session.clientEOF).
//
// Shutdown (shutdown.go) is PgBouncer's safe shutdown: StartShutdown
// closes the listeners and ends each session at its next transaction
// boundary (Terminate upstream, FATAL 57P01 to the client after all the
// server sent); Shutdown waits for that until its context is done, then
// ends the rest at once. Cancelling Serve's context closes everything
// at once, without a FATAL, as before.
//
// What it rewrites is decided on a side connection of the session's
// database and user (SET ROLE), with the session's search_path: the rule
// learns the server's types there (rewrite.Types), and a rewritten text
// is used only after the server prepared it there (Parse and Describe,
// never executed) with the original's parameter and result types. A text
// whose validation fails is never rewritten again (by fingerprint) in
// that context. Decisions are cached per context and text for
// Config.DecisionTTL; a schema change a session sends (CREATE, ALTER,
// DROP, DISCARD, a DO block, CALL, a call of a function that may change
// the schema: see mutators; a prepared one at each Bind) drops its
// database's decisions, Flush every database's. A session
// that changes search_path or its role in a way the proxy does not follow
// (SET LOCAL, SET inside a transaction, set_config, SET ROLE) is not
// rewritten until DISCARD ALL or RESET ALL (see classifyContext).
//
// Last line of defence: while a rewritten statement awaits its first
// response at the start of an idle-state batch, the proxy relays no
// further client messages; if the upstream rejects it, the original text
// is sent instead and that text is never rewritten again. Inside a
// transaction or after a Flush the rejection reaches the client (counted
// as FallbackErrors); it happens only when a session sees other objects
// than the side connection in a way the proxy cannot see (see docs/design/proxy-guarantees.md).
//
// Relay cost: each direction of a session reads into one reused buffer
// with the connection's own Read and sends the messages of one read with
// one Write, without copying or allocating. A pgbench -S round trip costs
// the proxy 2 reads that return data, 2 that find the socket empty before
// the goroutine parks in Go's netpoller, and 2 writes; PgBouncer makes 2
// reads and 2 writes.
package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/rewrite"
)

// Protocol request codes (src/include/libpq/pqcomm.h).
const (
	sslRequestCode    = 80877103
	gssEncRequestCode = 80877104
	cancelRequestCode = 80877102
	// maxMessage bounds one protocol message (1 GiB, PostgreSQL's
	// PQ_LARGE_MESSAGE_LIMIT is 1 GiB - 1 as well): the upstream's, and
	// by default (Config.MaxMessageSize) the client's.
	maxMessage = 1 << 30
)

// Config configures a Proxy.
type Config struct {
	// Upstream is the server's DSN (libpq key=value or URL). Its host and
	// port are where client sessions go (without TLS); its user, password
	// and options open the side connections the rules consult (one small
	// pool per database and user clients use, acting as the client's user
	// with SET ROLE when it differs). Clients authenticate with their own
	// credentials.
	Upstream string
	// Shadow: decide and count rewrites, log them, send the original.
	Shadow bool
	// Disabled lists rule names that must not fire.
	Disabled map[string]bool
	// CacheSize bounds the cache from (database, statement text) to
	// decision; 0 means 10000.
	CacheSize int
	// Logger receives one line per session error, fallback and (in
	// shadow mode) would-be rewrite; nil discards.
	Logger *slog.Logger
	// MaxClients bounds the client connections served at once (from
	// accept to close, authenticated or not); a client over it gets
	// PostgreSQL's FATAL "sorry, too many clients already" (53300) and
	// is closed. 0 means DefaultMaxClients().
	MaxClients int
	// MaxMessageSize bounds, in bytes (type byte excluded, length field
	// included), a client message after authentication: a client
	// announcing a longer one is disconnected before it is read. 0
	// means 1 GiB (PostgreSQL's PQ_LARGE_MESSAGE_LIMIT). Before
	// authentication PostgreSQL's own limits apply (startup packet
	// 10,000 bytes, password replies 65,535, SCRAM replies 1,024).
	MaxMessageSize int
	// MaxParseTokens bounds the work of deciding about a statement: a
	// text the pre-filter passes with more tokens than this (PostgreSQL's
	// scanner's, comments included) is relayed unchanged without being
	// parsed (Stats.NotParsedTokens; logged once). 0 means
	// DefaultMaxParseTokens, -1 no bound.
	MaxParseTokens int
	// DecisionTTL is how long a decision, and the list of functions
	// whose call may change the schema (see classifyContext), are used
	// before they are made again: the longest a schema change the
	// proxy does not see (another connection's DDL, a trigger's)
	// goes unnoticed. 0 means DefaultDecisionTTL.
	DecisionTTL time.Duration
	// Capture, when set, receives every client session (see Capture);
	// the caller closes it after Serve returned.
	Capture *Capture
}

// DefaultMaxParseTokens is Config.MaxParseTokens' default: 20,000 tokens
// (100-200 KB of typical SQL, a 3,000-arm OR of subqueries), whose
// decision costs the proxy about 0.1-0.15 s of CPU once per distinct
// text; the 210,000 tokens of a 570 KB statement of 30,000 OR arms
// cost 1.4 s.
const DefaultMaxParseTokens = 20000

// Proxy relays client sessions to one upstream server.
type Proxy struct {
	cfg        Config
	upNet      string
	upAddr     string
	catCfg     *pgxpool.Config
	cache      *decisionCache
	stats      counters
	log        *slog.Logger
	mu         sync.Mutex // guards sessions and keys; held by the writers of dbs and epoch
	catMu      sync.Mutex // guards sides (held while connecting)
	sides      map[sideKey]*sideEntry
	dbs        sync.Map      // database -> *dbState: DDL generation, functions whose call may change the schema
	epoch      atomic.Uint64 // Flush calls, added to every generation
	sessions   map[*session]struct{}
	keys       map[string]*session // BackendKeyData -> session
	wg         sync.WaitGroup
	dialer     net.Dialer
	active     atomic.Int64 // client connections being served
	ruleFired  map[string]*atomic.Uint64
	ruleVetoed map[string]*atomic.Uint64
	// Shutdown (shutdown.go): draining is set by StartShutdown;
	// listeners are Serve's (guarded by mu), starting the client
	// connections not yet sessions (guarded by mu); live counts the
	// client connections being handled (sessions, logins, refusals);
	// shutDone is closed when Shutdown returns.
	draining  atomic.Bool
	listeners map[net.Listener]struct{}
	starting  map[net.Conn]struct{}
	live      atomic.Int64
	shutDone  chan struct{}
	shutOnce  sync.Once
	// tokensLogged: a statement over MaxParseTokens was logged.
	tokensLogged atomic.Bool
	// returning: returnMemory planned a return of free memory.
	returning atomic.Bool
	// wrapUp, if set (tests), wraps each upstream connection.
	wrapUp func(net.Conn) net.Conn
}

// New checks cfg and returns a Proxy. It does not connect; it warms the
// SQL parser (rewrite.Warm), so that no client statement pays its
// one-time initialisation.
func New(cfg Config) (*Proxy, error) {
	pc, err := pgconn.ParseConfig(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("proxy: upstream: %w", err)
	}
	catCfg, err := pgxpool.ParseConfig(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("proxy: upstream: %w", err)
	}
	catCfg.MaxConns = 2
	// No liveness ping when a decision acquires a side connection idle
	// for over a second (pgxpool's default): that would put a round trip
	// before the first statement of every quiet period. A broken side
	// connection fails one decision instead (its statement goes unchanged,
	// nothing is cached) and the pool replaces it.
	catCfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	if _, ok := catCfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		// A DBA tells the side connections apart in pg_stat_activity.
		catCfg.ConnConfig.RuntimeParams["application_name"] = SideApplicationName
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 10000
	}
	if cfg.DecisionTTL <= 0 {
		cfg.DecisionTTL = DefaultDecisionTTL
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients()
	}
	switch {
	case cfg.MaxParseTokens == 0:
		cfg.MaxParseTokens = DefaultMaxParseTokens
	case cfg.MaxParseTokens < 0:
		cfg.MaxParseTokens = 0 // CheckWork: no bound
	}
	if cfg.MaxMessageSize <= 0 || cfg.MaxMessageSize > maxMessage {
		cfg.MaxMessageSize = maxMessage
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := &Proxy{cfg: cfg, catCfg: catCfg, cache: newDecisionCache(cfg.CacheSize, cfg.DecisionTTL), log: log,
		sides: map[sideKey]*sideEntry{}, sessions: map[*session]struct{}{}, keys: map[string]*session{},
		listeners: map[net.Listener]struct{}{}, starting: map[net.Conn]struct{}{}, shutDone: make(chan struct{}),
		ruleFired: map[string]*atomic.Uint64{}, ruleVetoed: map[string]*atomic.Uint64{}}
	for _, r := range rewrite.Rules() {
		p.ruleFired[r], p.ruleVetoed[r] = new(atomic.Uint64), new(atomic.Uint64)
	}
	host, port := pc.Host, pc.Port
	if len(host) > 0 && host[0] == '/' {
		p.upNet, p.upAddr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", host, port)
	} else {
		p.upNet, p.upAddr = "tcp", net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	rewrite.Warm()
	return p, nil
}

// Warm opens the side connection of the upstream DSN's database and user
// and runs one decision on it (see openSide), so that a first client
// statement pays neither a login nor a fresh backend's first catalog
// lookups. Serve does the same in the background; calling Warm before
// Serve makes it synchronous. It returns that connection's error (the
// proxy still serves: statements of that database and user stay
// unchanged until a retry succeeds).
func (p *Proxy) Warm(ctx context.Context) error {
	db := p.catCfg.ConnConfig.Database
	if _, err := p.side(ctx, db, p.catCfg.ConnConfig.User); err != nil {
		return err
	}
	// the functions that may change the schema: listed now, not by the
	// first statement that calls a function
	p.mutatorsFor(ctx, db)
	return nil
}

// generation is database db's DDL generation: it grows whenever a session
// sends (and again when it completes) a statement that may change the
// schema, and decisions of an older generation are not used.
// It takes no lock.
func (p *Proxy) generation(db string) uint64 {
	return p.genOf(p.dbState(db))
}

// invalidate starts a new generation for db and drops its decisions.
func (p *Proxy) invalidate(db string) {
	st := p.dbState(db)
	p.mu.Lock()
	st.gen.Add(1)
	p.mu.Unlock()
	p.cache.clear(db, false)
	p.forget(db, false)
	p.stats.invalidations.Add(1)
}

// Flush starts a new generation for every database, as a schema change
// sent through the proxy does for its own: every cached decision, and
// every list of functions whose call may change the schema, is made
// again on next use. It is what to do after a schema change made around
// the proxy ('erplab proxy' calls it on SIGHUP). Safe for concurrent use.
func (p *Proxy) Flush() {
	p.mu.Lock()
	p.epoch.Add(1)
	p.mu.Unlock()
	p.cache.clear("", true)
	p.forget("", true)
	p.stats.invalidations.Add(1)
}

// Serve accepts clients on ln until ctx is done, then closes ln and every
// session at once and waits for them; or until Shutdown closes ln, then
// waits for Shutdown to return. It returns nil after either. It opens
// the side connection of the upstream DSN's database and user in the
// background at once (each session's at its startup), so a first
// statement does not wait for a login.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx) // ends the background work
	defer cancel()
	p.mu.Lock()
	if p.draining.Load() {
		p.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	p.listeners[ln] = struct{}{}
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.Warm(ctx)
	}()
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	end := func(err error) error {
		if err == nil && ctx.Err() == nil && p.draining.Load() {
			select { // a safe shutdown: the sessions end at their pace
			case <-p.shutDone:
			case <-ctx.Done():
			}
		}
		cancel()
		p.closeAll()
		p.wg.Wait()
		p.closeSides()
		return err
	}
	var delay time.Duration // accept back-off, as net/http's Server
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || p.draining.Load() {
				return end(nil)
			}
			if errors.Is(err, net.ErrClosed) {
				return end(fmt.Errorf("proxy: accept: %w", err))
			}
			// EMFILE, ENFILE, ECONNABORTED, ENOBUFS...: never fatal.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			p.stats.acceptErrors.Add(1)
			p.log.Warn("accept failed; retrying", "err", err, "in", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
			}
			continue
		}
		delay = 0
		p.live.Add(1)
		if p.active.Add(1) > int64(p.cfg.MaxClients) {
			p.active.Add(-1)
			p.stats.tooManyClients.Add(1)
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer p.live.Add(-1)
				p.turnAway(ctx, c, codeTooMany, "sorry, too many clients already",
					fmt.Sprintf("erplab proxy serves at most %d clients at once (--max-clients).", p.cfg.MaxClients))
			}()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.live.Add(-1)
			defer p.active.Add(-1)
			p.handle(ctx, c)
		}()
	}
}

// turnAway answers a client the proxy does not serve (over
// Config.MaxClients: 53300; during a shutdown: 57P01) as PostgreSQL does
// (src/backend/postmaster/postmaster.c: the startup packet is read
// first, an SSLRequest or GSSENCRequest answered "no" and a
// CancelRequest forwarded, then the FATAL with detail) and closes it:
// libpq shows the FATAL whatever its sslmode. The exchange is bounded by
// tooManyTimeout.
func (p *Proxy) turnAway(ctx context.Context, c net.Conn, code, msg, detail string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(tooManyTimeout))
	if _, _, ok := p.startupPhase(ctx, c, bufio.NewReaderSize(c, 512)); !ok {
		return // a cancel request (forwarded), or the client went away
	}
	writeError(c, &pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg, Detail: detail})
}

// tooManyTimeout bounds the startup exchange with a client turned away.
const tooManyTimeout = 5 * time.Second

// DefaultMaxClients is the default of Config.MaxClients: a quarter of
// the soft limit of open files (RLIMIT_NOFILE; a session holds two
// descriptors, side connections and the listener take more) less 128,
// between 1 and 5000.
func DefaultMaxClients() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == ^uint64(0) {
		return 5000
	}
	return int(max(1, min(5000, (int64(rl.Cur)-128)/4)))
}

// RaiseFileLimit raises the soft limit of open files (RLIMIT_NOFILE) to
// the hard limit, where allowed, and returns the soft limit in effect.
// The Go runtime does so at start on Linux already; calling it again is
// harmless.
func RaiseFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("proxy: getrlimit: %w", err)
	}
	if rl.Cur < rl.Max {
		up := rl
		up.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up); err != nil {
			return rl.Cur, fmt.Errorf("proxy: setrlimit: %w", err)
		}
		rl = up
	}
	return rl.Cur, nil
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.sessions {
		s.close()
	}
}

// handle runs one client connection: the startup phase, the
// authentication by the upstream (relayed, see authenticate), then the
// session. Nothing is rewritten and no side connection is opened before
// the upstream sent AuthenticationOk, and the side connection is the
// one of the database and user it authenticated.
func (p *Proxy) handle(ctx context.Context, client net.Conn) {
	defer client.Close()
	p.stats.connections.Add(1)
	cr := bufio.NewReaderSize(client, relayBuffer)
	_ = client.SetReadDeadline(time.Now().Add(authTimeout))
	stopClient := context.AfterFunc(ctx, func() { _ = client.Close() })
	defer stopClient()
	p.mu.Lock()
	p.starting[client] = struct{}{}
	p.mu.Unlock()
	defer p.started(client)
	startup, params, ok := p.startupPhase(ctx, client, cr)
	if !ok {
		return
	}
	if p.draining.Load() {
		writeFatal(client, codeAdminShutdown, msgRefuseShutdown)
		return
	}
	capt := p.cfg.Capture.open(params) // nil without a capture
	defer capt.close()
	up, err := p.dialer.DialContext(ctx, p.upNet, p.upAddr)
	if err != nil {
		p.log.Warn("cannot reach upstream", "err", err)
		writeFatal(client, "08006", "erplab proxy: cannot reach the upstream server")
		return
	}
	if p.wrapUp != nil {
		up = p.wrapUp(up)
	}
	defer up.Close()
	stopUp := context.AfterFunc(ctx, func() { _ = up.Close() })
	defer stopUp()
	if _, err := up.Write(startup); err != nil {
		return
	}
	if params == nil {
		// An unsupported protocol version or a malformed packet: the
		// server's own error goes to the client.
		p.stats.refusedStartups.Add(1)
		refuse(client, cr, up)
		return
	}
	upRest, err := authenticate(client, cr, up)
	if err != nil {
		if errors.Is(err, errReplyTooLong) {
			p.stats.oversized.Add(1)
			p.log.Info("client disconnected during authentication", "err", err)
		}
		return
	}
	_ = client.SetReadDeadline(time.Time{})
	db, user := params["database"], params["user"]
	if db == "" {
		db = user
	}
	startPath, startUnknown := startupPath(params)
	s := &session{p: p, client: client, up: up, cin: newInbound(client, p.returnMemory), uin: newInbound(up, p.returnMemory),
		cw: newOutbound(client), uw: newOutbound(up),
		db: db, user: user, path: startPath, startPath: startPath, startUnknown: startUnknown,
		closed: make(chan struct{}), requests: 1, cap: capt.loggedIn()}
	s.ctxUnknown.Store(startUnknown)
	s.end.sent.Store(2) // the startup packet: one request, awaiting its ReadyForQuery
	p.wg.Add(1)
	go func() { // the side connection logs in while the session starts
		defer p.wg.Done()
		if _, err := p.side(ctx, db, user); err == nil {
			p.mutatorsFor(ctx, db) // listed before the first call is judged
		}
	}()
	if k := cr.Buffered(); k > 0 { // sent by the client before the session started
		b, _ := cr.Peek(k)
		s.cin.n = copy(s.cin.buf, b)
	}
	s.uin.n = copy(s.uin.buf, upRest) // ParameterStatus, BackendKeyData, ReadyForQuery...
	p.mu.Lock()
	p.sessions[s] = struct{}{}
	delete(p.starting, client)
	p.mu.Unlock()
	p.stats.sessions.Add(1)
	defer func() {
		p.mu.Lock()
		delete(p.sessions, s)
		if s.key != "" {
			delete(p.keys, s.key)
		}
		p.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.upstreamLoop(ctx)
		s.sayEnd() // the FATAL of a session the proxy ended, after all the server sent
		s.close()
	}()
	s.clientLoop(ctx)
	if s.end.state.Load() == endNone {
		s.close()
	} // else the upstream closes (Terminate sent, or closed by endNow)
	<-done
}

// started forgets client as a connection logging in.
func (p *Proxy) started(client net.Conn) {
	p.mu.Lock()
	delete(p.starting, client)
	p.mu.Unlock()
}

// cancel forwards a CancelRequest for a key of one of our sessions.
func (p *Proxy) cancel(ctx context.Context, m *pgproto3.CancelRequest, pkt []byte) {
	key := cancelKey(m.ProcessID, m.SecretKey)
	p.mu.Lock()
	_, ok := p.keys[key]
	p.mu.Unlock()
	if !ok {
		p.stats.cancelsUnknown.Add(1)
		return
	}
	p.sendCancel(ctx, pkt)
}

// sendCancel sends the CancelRequest pkt to the upstream server and waits
// (at most 5 s) for it to close the connection.
func (p *Proxy) sendCancel(ctx context.Context, pkt []byte) {
	c, err := p.dialer.DialContext(ctx, p.upNet, p.upAddr)
	if err != nil {
		p.log.Warn("cancel: cannot reach upstream", "err", err)
		return
	}
	defer c.Close()
	if _, err := c.Write(pkt); err == nil {
		p.stats.cancels.Add(1)
		// The server closes the connection when done.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, c)
	}
}

func cancelKey(pid uint32, secret []byte) string {
	return strconv.FormatUint(uint64(pid), 10) + "/" + string(secret)
}

// writeFatal sends an ErrorResponse with severity FATAL.
func writeFatal(w io.Writer, code, msg string) {
	writeError(w, fatal(code, msg, ""))
}

// writeError sends ErrorResponse e.
func writeError(w io.Writer, e *pgproto3.ErrorResponse) {
	if b, err := e.Encode(nil); err == nil {
		_, _ = w.Write(b)
	}
}
