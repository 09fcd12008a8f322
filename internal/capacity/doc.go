// Package capacity is `erplab capacity`: how many users (or arrivals per
// second) a server carries at APDEX >= a target, and what stops it.
//
// # The search
//
// Search (search.go) is pure: Next gives the load to run, Record takes
// its Judgement. Loads start at Plan.Start and grow by Plan.Step (xF
// geometric, +N arithmetic; for users rounded up to a whole number) up to
// Plan.Max, which is always tried. The first bad load starts a bisection
// between the last good and the first bad load (the midpoint, rounded for
// users) until they are within Plan.Resolution of the last good load, or
// 1 user apart. A load bad from the start bisects down towards 1 user.
// A load whose APDEX interval straddles the target, or an operation's p95
// interval its --p95 limit (and only such interval criteria decide it: no
// error rate over its limit, no refused connections), is run
// Plan.Repeats (1) more times and decided by the means of its attempts
// (APDEX against the target, each limited p95 against its limit). The capacity is the highest
// good load.
//
// # One step
//
// Run (execute.go) drives one server for the whole search (with no DSN
// a throwaway one, removed at the end); the data is set up by the first
// step (loadtest.Options.SkipSetup for the others). A step is one
// loadtest.Run: Ramp from 0 to the load, then Hold; Ramp + Warmup are its
// warm-up, recorded apart and not scored. In the open model the load is
// an arrival rate (reached over Ramp) served by Workers VUs. Its own
// results file and output (.log) are kept under <out>-steps/.
//
// Judge (judge.go) decides a step, in this order:
//   - a status other than "completed" (aborted, stalled): the server
//     failed: the search ends, every finished step kept;
//   - a disk full (the step's results or log could not be written:
//     ENOSPC; or the server's disk_full, SQLSTATE 53100): the search
//     ends as "disk full", every finished step kept, never as "server
//     failed";
//   - the load generator saturated: erplab's own CPU (from the
//     observations' process-tree split, else /proc/self over the step)
//     at 90 % of its cores (GOMAXPROCS), or the host's CPUs busy >= 95 %
//     with erplab using 25 % or more of them, and more than the server
//     (a neighbour's load on a busy host is not erplab's): the search ends,
//     and the step is never counted as the server's capacity;
//   - the target: integral APDEX below Target.Apdex, failed operations
//     over Target.ErrorRate, a p95 over its Target.P95 limit, connections
//     refused (SQLSTATE 53300, 57P03, class 08; or a step that could not
//     open its pool). Any of them makes the step bad.
//
// APDEX and p95 come with 95 % confidence intervals from
// compare.Estimate: the moving-block bootstrap over the step's scored
// intervals that `erplab compare` uses for single runs (the bootstrap
// standard error, value ± 1.96·se).
//
// # The limiting resource
//
// ResourcesOf reads a step's observations after its warm-up: the share
// of active session time in each wait event (pg_stat_activity samples,
// "CPU" for not waiting), the server's CPU (its process tree), the
// host's busy and iowait shares, erplab's CPU, client connections, and
// from the operations the share of response time spent waiting for a
// pool connection. Limiting names, from the first bad step compared with
// the last good one: the pool when pool wait is >= 33 % of the response
// time (half the database time); else the top wait event (not CPU)
// holding >= 20 % of active time, with its share at the last good step;
// else server CPU >= 85 %, a host
// busy >= 95 % (with the share of other processes: a neighbour's load,
// and the starvation, Resources.Starvation: the ms the server's
// processes and erplab's threads waited for a CPU per ms they ran, from
// schedstat, as compare's noise guard measures it), iowait >= 20 %; the server's CPU is always added. The
// verdict line (Document.Conclude) reads "capacity 46 users at APDEX
// 0.86 [0.83-0.88]; at 64 users APDEX 0.74 < 0.85; limited by
// LWLock:LockManager (38 % of active time, 9 % at 32 users), server CPU
// 97 %".
//
// # The field's users
//
// ThinkForPace: a user who performs N key operations per hour has a
// cycle (response time R + think time Z) of 3600/N s; erplab takes Z
// exponential with mean 3600/N s, leaving R out of the mean since at
// capacity R is within the operations' targets (seconds) and Z tens of
// seconds (N = 120 gives 30 s).
//
// # A known answer
//
// The acceptance test's workload holds one of C pool connections for a
// fixed service time S per operation, with a fixed think time Z and an
// APDEX target T >= S. By the asymptotic bounds of closed queueing
// networks (E. D. Lazowska, J. Zahorjan, G. S. Graham, K. C. Sevcik,
// "Quantitative System Performance", Prentice-Hall 1984, §5.2, with the
// C-server station's demand S/C): throughput X(N) <= min(N/(S+Z), C/S)
// and response time R(N) >= max(S, N·S/C - Z). With no variability the
// system runs on the bounds, so R(N) <= T, every operation satisfied,
// exactly while N <= C·(T+Z)/S; beyond it every operation is at least
// tolerating and APDEX falls to 0.5 and below. The capacity at any
// APDEX target above 0.5 is therefore KnownCapacity = C·(T+Z)/S users
// (C = 4, S = 50 ms, Z = 150 ms, T = 100 ms: 20 users; the knee where
// pool wait starts is C·(S+Z)/S = 16).
//
// # A/B of capacity
//
// RunAB (ab.go, `erplab capacity --variant`) runs the same search for
// the baseline and each variant on one embedded server: the data is
// built once into a template database (experiment.BuildTemplate) and
// every search runs inside experiment.InVariant: a fresh copy of the
// template, the variant's remedies applied for the whole search and
// undone after it (also on failure and Ctrl-C), the copy dropped. The
// searches of the sides run --rounds times in experiment.Order
// (balanced A B B A ... by default). It lives in `erplab capacity`, not
// in `erplab ab`: every flag of the search (--start, --step, --hold,
// --apdex ...) is capacity's and ab's load profile (--users,
// --duration, --stage) has no meaning for a search.
//
// The verdict (VerdictOf) treats each search's capacity as one
// observation, the round as the unit (as compare does with rounds):
//   - a search that did not finish (generator saturated, server
//     failed, interrupted) makes it "inconclusive", naming the search;
//   - one search per side is "inconclusive: one round each" (a search's
//     capacity has no interval of its own: the bisection's resolution
//     and the machine's noise both move it);
//   - otherwise the exact two-sided Wilcoxon rank-sum test of the
//     rounds' capacities (compare.ExactRankSum: every split of the
//     pooled values enumerated, mid-ranks for ties; Mann, Whitney 1947;
//     Hollander, Wolfe, "Nonparametric Statistical Methods", §4.1)
//     decides at --alpha: "better" or "worse" by the medians' direction,
//     else "no significant difference". Its smallest p-value, when every
//     round of one side lies above every round of the other, is
//     2/C(n+m, n) (compare.SeparatedP): 0.1 for 3 rounds against 3, so
//     3 rounds each are "inconclusive" with the number needed (4 at 0.05).
//
// A capacity of "at least --max-users" (the search reached its maximum
// good: a lower bound, "capped") is not a capacity:
//   - when every round of both sides is capped the order is unknowable:
//     "inconclusive: both at least 16 users (every search reached
//     --max-users good): raise --max-users";
//   - otherwise the rank-sum test ranks a capped round as the maximum:
//     above every uncapped round (a found capacity is below the maximum,
//     so that order is known) and tied with the other capped rounds
//     (their order is not), which only lowers the test's power; the
//     reason then adds "(capped rounds rank as ties at --max-users)";
//   - the relative change of the medians is a bound when one median is a
//     lower bound ("(>= +39 %)" for the variant's, "(<= -10 %)" for the
//     baseline's) and left out when both are.
//
// Starvation (the noise guard of compare, internal/compare/doc.go
// "Noise guard"): each side's starvation is the mean over its finished
// searches of the run delay per ms run of the server's processes and
// erplab's threads at the step that decided the capacity
// (Document.KneeStarvation: the first bad step, else the last good
// one). With F = (1+ρB)/(1+ρA) (compare.StarvationLimit), a better or
// worse verdict whose capacity ratio max(B/A, A/B) is at most F², the
// side carrying more users being the less starved one, reads
// "inconclusive: starvation differed: ... (else better: ...)"
// (ABVerdict.Starvation, its noise line printed before the VERDICT
// line). A "no significant difference" keeps its verdict. Searches
// whose first bad step was limited by other processes' load
// (Document.ForeignLimited) are still named in a warning line
// ("warning: foreign load: ..."), information only: on a saturated host
// both sides read ~100 % and the share says nothing of how much CPU the
// server was denied.
//
// When the rounds cannot reach --alpha at all the reason quotes the
// smallest possible p (complete separation), not an observed one.
//
// The line reads "capacity 23 users (22-24 over 4 rounds)
// -> 30.5 users (29-31 over 4 rounds) (+33 %); better: exact rank-sum p
// 0.0286 <= 0.05 over 4 and 4 rounds". Beside it, each side's limiting
// resource per search and the integral APDEX of the sides at every load
// all of them ran (each step's compare.Estimate interval).
//
// The A/B document (ABDocument, format "erplab-capacity-ab") holds every
// search with its steps (without their run documents, which stay in the
// search's own capacity document and steps directory under
// <out>-searches/) and is rewritten after every search.
//
// # The document
//
// Document (document.go, format "erplab-capacity", docs/results-format.md)
// holds the target, the search, every step (its judgement, intervals,
// resources and its own results document) and the Result; Run rewrites
// it atomically after every step, so a killed or interrupted search
// keeps its finished steps and the capacity known so far.
//
// Both documents record their Writer (PID and host). A killed search or
// experiment never writes its final status, so its file keeps "running";
// StatusText (Writer.Describe, one function for both documents) reads
// such a file as "incomplete (the writing process, pid N, is gone)" when
// that process no longer exists on this host, "running (pid N)" while it
// does, and "running or killed (...)" when written on another host or by
// an erplab that recorded no writer. Every reader that shows a status
// (erplab report, ABDocument.WriteText, the verdict's reasons) uses it.
package capacity
