package proxy

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are the proxy's running totals.
type counters struct {
	connections, sessions           atomic.Uint64
	statements, prefilterSkips      atomic.Uint64
	cacheHits, cacheMisses          atomic.Uint64
	parses, parseErrors, parseNanos atomic.Uint64
	notParsed, notParsedTokens      atomic.Uint64
	refusedStartups, oversized      atomic.Uint64
	invalidMessages                 atomic.Uint64
	tooManyClients, acceptErrors    atomic.Uint64
	hangups                         atomic.Uint64
	rewrites, shadow, vetoes        atomic.Uint64
	fallbacks, fallbackErrors       atomic.Uint64
	cancels, cancelsUnknown         atomic.Uint64
	validated, validationFailures   atomic.Uint64
	contextUnknown, sideErrors      atomic.Uint64
	invalidations                   atomic.Uint64
	shutdownIdle, shutdownCut       atomic.Uint64
	bindsRewritten, bindsOriginal   atomic.Uint64
	conditionalKept                 atomic.Uint64
}

// Stats is a snapshot of the proxy's counters.
type Stats struct {
	// Connections accepted, and sessions relayed to the upstream.
	Connections, Sessions uint64
	// Statements: Query and Parse texts seen; PrefilterSkips of them
	// never parsed (no OR/SELECT/IN words).
	Statements, PrefilterSkips uint64
	CacheHits, CacheMisses     uint64
	// Parses by the rewriter, ParseErrors among them, ParseTime total.
	Parses, ParseErrors uint64
	ParseTime           time.Duration
	// NotParsed: statements never given to the parser, too large or
	// too deep for it (rewrite.CheckLimits); relayed unchanged.
	NotParsed uint64
	// NotParsedTokens: statements never given to the parser because
	// they have more tokens than Config.MaxParseTokens (the parse would
	// cost too much work); relayed unchanged.
	NotParsedTokens uint64
	// Rewrites: statements sent rewritten; Shadow: would-be rewrites in
	// --shadow mode; Vetoes: decisions where a rule matched but a
	// precondition failed.
	Rewrites, Shadow, Vetoes uint64
	// Fallbacks: rewritten statements the upstream rejected and that were
	// re-sent as written; FallbackErrors: rejections passed to the client
	// (inside a transaction or a batch already under way).
	Fallbacks, FallbackErrors uint64
	// Cancels forwarded, and CancelsUnknown dropped (key of no session).
	Cancels, CancelsUnknown uint64
	// Validated: fresh decisions whose rewritten text the server prepared
	// on a side connection with the original's types; ValidationFailures:
	// rewrites it rejected or described differently (never tried again).
	Validated, ValidationFailures uint64
	// ContextUnknown: statements left unchanged because their session
	// changed search_path or role in a way the proxy does not follow;
	// SideErrors: decisions the side connection could not make (sent
	// unchanged, not cached); Invalidations: schema changes seen, each
	// dropping its database's decisions.
	ContextUnknown, SideErrors, Invalidations uint64
	// RefusedStartups: startup packets of an unsupported protocol
	// version or malformed, answered by the upstream's error;
	// Oversized: clients disconnected for a message over the limits
	// (before authentication PostgreSQL's, after it
	// Config.MaxMessageSize); TooManyClients: connections over
	// Config.MaxClients, refused with 53300; AcceptErrors: failed
	// accepts (retried); Hangups: sessions whose client closed without
	// a Terminate or whose server closed while the client was still
	// connected (session.countHangup);
	// InvalidMessages: clients disconnected with FATAL 08P01 for a
	// message type PostgreSQL does not know or an invalid length after
	// authentication.
	RefusedStartups, Oversized, TooManyClients, AcceptErrors, Hangups, InvalidMessages uint64
	// ShutdownIdle: sessions a shutdown ended at a transaction boundary
	// (FATAL 57P01 after Terminate upstream); ShutdownCut: sessions it
	// ended without waiting (Shutdown's context done).
	ShutdownIdle, ShutdownCut uint64
	// BindsRewritten and BindsOriginal count the executions (Binds) of
	// statements rewritten on condition of their parameters' values
	// (rewrite.Result.BindChecks): run rewritten, or run as written
	// because a value did not pass (or could not be checked);
	// ConditionalKept: such statements sent as written at Parse (a
	// simple Query, not at a batch's start, ...).
	BindsRewritten, BindsOriginal, ConditionalKept uint64
	// Fired and Vetoed count, per rule, the places it fired at (arms
	// rewritten) and vetoed (ORs left as written); Vetoes above counts
	// statements left unchanged with a veto.
	Fired, Vetoed map[string]uint64
	// Cached decisions.
	Cached int
}

// Stats returns a snapshot of the counters.
func (p *Proxy) Stats() Stats {
	c := &p.stats
	s := Stats{
		Connections: c.connections.Load(), Sessions: c.sessions.Load(),
		Statements: c.statements.Load(), PrefilterSkips: c.prefilterSkips.Load(),
		CacheHits: c.cacheHits.Load(), CacheMisses: c.cacheMisses.Load(),
		Parses: c.parses.Load(), ParseErrors: c.parseErrors.Load(), ParseTime: time.Duration(c.parseNanos.Load()),
		NotParsed: c.notParsed.Load(), NotParsedTokens: c.notParsedTokens.Load(),
		RefusedStartups: c.refusedStartups.Load(), Oversized: c.oversized.Load(), InvalidMessages: c.invalidMessages.Load(),
		TooManyClients: c.tooManyClients.Load(), AcceptErrors: c.acceptErrors.Load(), Hangups: c.hangups.Load(),
		ShutdownIdle: c.shutdownIdle.Load(), ShutdownCut: c.shutdownCut.Load(),
		BindsRewritten: c.bindsRewritten.Load(), BindsOriginal: c.bindsOriginal.Load(), ConditionalKept: c.conditionalKept.Load(),
		Rewrites: c.rewrites.Load(), Shadow: c.shadow.Load(), Vetoes: c.vetoes.Load(),
		Fallbacks: c.fallbacks.Load(), FallbackErrors: c.fallbackErrors.Load(),
		Cancels: c.cancels.Load(), CancelsUnknown: c.cancelsUnknown.Load(),
		Validated: c.validated.Load(), ValidationFailures: c.validationFailures.Load(),
		ContextUnknown: c.contextUnknown.Load(), SideErrors: c.sideErrors.Load(), Invalidations: c.invalidations.Load(),
		Fired: map[string]uint64{}, Vetoed: map[string]uint64{}, Cached: p.cache.len(),
	}
	for r, v := range p.ruleFired {
		s.Fired[r] = v.Load()
	}
	for r, v := range p.ruleVetoed {
		s.Vetoed[r] = v.Load()
	}
	return s
}

// String is the shutdown summary, a few lines.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sessions %d (connections %d), statements %d (pre-filter skipped %d), cache hits %d, misses %d (%d cached)\n",
		s.Sessions, s.Connections, s.Statements, s.PrefilterSkips, s.CacheHits, s.CacheMisses, s.Cached)
	avg := time.Duration(0)
	if s.Parses > 0 {
		avg = s.ParseTime / time.Duration(s.Parses)
	}
	fmt.Fprintf(&b, "parsed %d (errors %d, %.3f ms total, %d µs each; not parsed: too large/deep %d, too many tokens %d), rewritten %d, shadow %d (statements sent), decisions left unchanged by a veto %d, fallbacks %d (+%d passed on)\n",
		s.Parses, s.ParseErrors, float64(s.ParseTime)/1e6, avg.Microseconds(), s.NotParsed, s.NotParsedTokens, s.Rewrites, s.Shadow, s.Vetoes, s.Fallbacks, s.FallbackErrors)
	fmt.Fprintf(&b, "validated %d, validation failures %d, context unknown %d, side errors %d, schema changes %d\n",
		s.Validated, s.ValidationFailures, s.ContextUnknown, s.SideErrors, s.Invalidations)
	if s.BindsRewritten+s.BindsOriginal+s.ConditionalKept > 0 {
		fmt.Fprintf(&b, "rewritten on condition of parameter values: executions rewritten %d, run as written %d; statements kept as written %d\n",
			s.BindsRewritten, s.BindsOriginal, s.ConditionalKept)
	}
	rules := make([]string, 0, len(s.Fired))
	for r := range s.Fired {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	for _, r := range rules {
		fmt.Fprintf(&b, "rule %s: fired %d (arms rewritten), vetoed %d (ORs left as written), per decision\n", r, s.Fired[r], s.Vetoed[r])
	}
	fmt.Fprintf(&b, "cancels forwarded %d, unknown keys %d\n", s.Cancels, s.CancelsUnknown)
	fmt.Fprintf(&b, "refused: startups %d, oversized messages %d, invalid messages %d, too many clients %d; accept errors %d; hang-ups %d",
		s.RefusedStartups, s.Oversized, s.InvalidMessages, s.TooManyClients, s.AcceptErrors, s.Hangups)
	if s.ShutdownIdle+s.ShutdownCut > 0 {
		fmt.Fprintf(&b, "\nshutdown: sessions ended between transactions %d, without waiting %d", s.ShutdownIdle, s.ShutdownCut)
	}
	return b.String()
}

// Collector exposes the counters as Prometheus metrics (erplab_proxy_*).
func (p *Proxy) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Proxy }

var (
	descCounter = prometheus.NewDesc("erplab_proxy_events_total", "Proxy events by kind (sessions, statements, prefilter_skips, cache_hits, cache_misses, parses, parse_errors, not_parsed, not_parsed_tokens, rewrites, shadow, vetoes, fallbacks, fallback_errors, cancels, validated, validation_failures, context_unknown, side_errors, invalidations, refused_startups, oversized, invalid_messages, too_many_clients, accept_errors, binds_rewritten, binds_original, conditional_kept).", []string{"event"}, nil)
	descRule    = prometheus.NewDesc("erplab_proxy_rule_decisions_total", "Rewrite decisions per rule and outcome (fired, vetoed).", []string{"rule", "outcome"}, nil)
	descParse   = prometheus.NewDesc("erplab_proxy_parse_seconds_total", "Time spent parsing and rewriting statements, seconds.", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCounter
	ch <- descRule
	ch <- descParse
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	for _, e := range []struct {
		n string
		v uint64
	}{{"sessions", s.Sessions}, {"statements", s.Statements}, {"prefilter_skips", s.PrefilterSkips},
		{"cache_hits", s.CacheHits}, {"cache_misses", s.CacheMisses}, {"parses", s.Parses}, {"parse_errors", s.ParseErrors}, {"not_parsed", s.NotParsed}, {"not_parsed_tokens", s.NotParsedTokens},
		{"rewrites", s.Rewrites}, {"shadow", s.Shadow}, {"vetoes", s.Vetoes}, {"fallbacks", s.Fallbacks},
		{"fallback_errors", s.FallbackErrors}, {"cancels", s.Cancels}, {"validated", s.Validated},
		{"validation_failures", s.ValidationFailures}, {"context_unknown", s.ContextUnknown},
		{"side_errors", s.SideErrors}, {"invalidations", s.Invalidations},
		{"refused_startups", s.RefusedStartups}, {"oversized", s.Oversized}, {"invalid_messages", s.InvalidMessages},
		{"too_many_clients", s.TooManyClients}, {"accept_errors", s.AcceptErrors},
		{"binds_rewritten", s.BindsRewritten}, {"binds_original", s.BindsOriginal}, {"conditional_kept", s.ConditionalKept}} {
		ch <- prometheus.MustNewConstMetric(descCounter, prometheus.CounterValue, float64(e.v), e.n)
	}
	for r, v := range s.Fired {
		ch <- prometheus.MustNewConstMetric(descRule, prometheus.CounterValue, float64(v), r, "fired")
	}
	for r, v := range s.Vetoed {
		ch <- prometheus.MustNewConstMetric(descRule, prometheus.CounterValue, float64(v), r, "vetoed")
	}
	ch <- prometheus.MustNewConstMetric(descParse, prometheus.CounterValue, s.ParseTime.Seconds())
}
