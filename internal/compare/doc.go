// Package compare compares erplab run results (docs/results-format.md):
// a baseline against a variant, per key operation and for the integral,
// plus the recorded observations, with a verdict per row that separates a
// real difference from noise using only what results files keep
// (per-interval series with APDEX zones and histograms, sampler series).
//
// # The unit of replication is the round
//
// Per-second samples of one run are autocorrelated, and on a shared host
// the load of the neighbours is not stationary: a test that treats the
// intervals of one run as independent samples is overconfident (an A/A
// comparison on a busy 2-core machine once gave 28 rows "better" at
// p<0.0001). So the statistics replicate what varies:
//
//   - Rounds (CompareRounds with two or more documents per side; what
//     `erplab ab` produces): every row's statistic is computed per round
//     (one run), and the row's A and B are the means of the per-round
//     values. The effect B-A, its 95 % interval and the p-value all come
//     from Welch's t over the per-round values (unequal variances,
//     Welch-Satterthwaite degrees of freedom; B. L. Welch, Biometrika
//     34, 1947; NIST/SEMATECH e-Handbook §7.3.1). A round is the whole
//     run, so whatever made one run slower (a neighbour, a checkpoint, a
//     cold cache) is part of the round-to-round variance.
//   - One run per side (Compare): the effect is B-A of the two runs'
//     statistics; its standard error is the standard deviation of B*-A*
//     over Options.Replicates (1000) moving-block bootstrap resamples of
//     each run (H. R. Künsch, Ann. Statist. 17(3), 1989), intervals and
//     observation samples resampled separately, every row computed on the
//     same resample; interval and p-value from the normal approximation
//     (B. Efron, R. J. Tibshirani, "An Introduction to the Bootstrap",
//     1993, §6, §12.2). Block length per run and series: max(⌈n^(1/3)⌉,
//     the first lag whose sample autocorrelation falls inside ±2/√n),
//     at most n/3 (P. Hall, J. L. Horowitz, B.-Y. Jing, Biometrika 82(3),
//     1995 for the n^(1/3) order; Box, Jenkins, Reinsel §2.1.6 for the
//     band). The autocorrelation is that of the per-interval pooled APDEX
//     score (it moves with latency) for intervals and of the active
//     sessions for observation samples. The bootstrap captures the
//     dependence inside a run, not the run-to-run variation, so one run
//     per side never decides a row: every tested row reads
//     "inconclusive: one round each" with its effect, interval and
//     p-value (replication is the unit of proof; #31: an A/A of two
//     single runs once gave 6 rows "better").
//
// One run per side ends with the rounds hint (Comparison.RoundsHint, one
// line): the row that the fewest rounds would decide, among the primary
// rows when declared, else among all, leaving out the rows the noise
// guard would withhold (below), and how many rounds a side. For a
// row with bootstrap standard error se (from its interval) the hint
// takes se/√n as the standard error of B-A over n rounds a side, Welch's
// degrees of freedom 2n-2, and asks for p <= alpha/m (Holm's first step
// over the family's m tested rows) and the whole interval beyond the
// minimum effect; the smallest such n from 2 to MaxRoundsHint (50), or
// none. Runs vary at least as much as a run's intervals do, so the
// count is a lower bound ("at least").
//
// The seeds are fixed (Options.Seed), so a comparison is reproducible.
//
// # One statistic per row
//
// Direction, effect, interval and p-value of a row come from one
// statistic (the same function of a run, or of a resample of it):
//
//   - APDEX of an operation: (satisfied + tolerating/2) / samples of the
//     zone counts summed over the intervals; the integral: the
//     priority-weighted mean of the operations' scores (apdex.Integral).
//   - p50/p95/p99: from the merged HdrHistograms of the intervals
//     (HdrHistogram's rank rule), never a mean of per-interval
//     percentiles; files without interval histograms (schema 1) use the
//     run's own percentiles and cannot be bootstrapped.
//   - per_second: executions over the intervals' time; error_pct: errors
//     over executions.
//   - Observations, over the samples after the warm-up: the mean share of
//     active sessions in a wait event; the server's own user and system
//     CPU (the "host CPU" rows: the postmaster's process tree, not the
//     host total, which neighbours move; files without process-tree
//     figures show the host total untested); temp files and bytes per
//     second (Σ rate·dt / Σ dt).
//   - Cumulative series are compared by their delta per round, never
//     point by point: catalog growth_bytes is the sum of the sampled
//     increments of the catalogs' size over the run.
//
// # Verdicts
//
// The p-values of all tested rows of a comparison (of each family, with
// primary rows: see below) are corrected together with Holm's step-down
// procedure (S. Holm, Scand. J. Statist. 6, 1979;
// family-wise error rate Options.Alpha). A row of a comparison of rounds
// is better or worse (higher or lower for neutral rows; never with one
// run per side) only when it is significant after Holm and
// its whole 95 % interval lies beyond the minimum effect MinDelta =
// max(Options.MinEffect·|A|, the metric's floor): APDEX 0.01, latencies
// 1 ms, throughput 0.1/s, error rate 0.5 points, wait share 2 points,
// server CPU 1 point of all CPUs, temp files 0.1/s, temp bytes 64 KiB/s,
// catalog growth 64 KiB. The floors keep a difference between near-zero
// values (iowait 0.00 -> 0.14 %) from being "worse", and the noise guard
// (below) withholds a decided row starvation could explain. Otherwise a
// row is "no significant difference" (rounds) or "inconclusive: one
// round each" (single runs, every tested row); rows whose values do not vary at all (no errors on
// either side) are "no significant difference" without a test, and rows
// that cannot be tested (no value on a side, too few intervals or
// rounds: Row.Note) are "n/a". Row.UntestedReason and
// Row.NoIntervalReason say why a row has no p-value or no interval.
//
// # Primary and exploratory rows
//
// One family of all rows (about 65 tested rows for the ERP workload)
// protects against any false "better" somewhere, but it costs power where
// it matters: the tmpfs temp tablespace moved temp_table_storm's APDEX
// the right way in 4 of 4 experiments without surviving Holm over 65
// rows. Confirmatory trials solve this by declaring, before the
// experiment, the primary variable(s) that answer the question, and
// treating every other variable as secondary or exploratory (ICH E9,
// "Statistical Principles for Clinical Trials", 1998: §2.2.2 "Primary
// and Secondary Variables": generally one primary variable, specified in
// the protocol before the trial, with secondary variables as supportive
// measurements; §2.2.5 "Multiple Primary Variables": when an effect on
// any one of several primary variables is to be shown, the multiplicity
// is adjusted for; §5.6 "Adjustment of Significance and Confidence
// Levels": the adjustment is stated in the protocol).
//
// So a comparison may carry pre-declared primary rows (Options.Primary;
// `erplab ab` takes them from each remedy's registration, or --primary):
//
//   - The primary rows form their own Holm family at Options.Alpha, and
//     only they decide the comparison's verdict (Comparison.Primary).
//     Each primary row needs, as every row, significance after Holm
//     within its family and the whole 95 % interval beyond the minimum
//     effect. The verdict is, in this order: "inconclusive: starvation
//     differed" when the noise guard withheld a primary row (one that
//     would have been decided); better, worse, higher or lower when at
//     least one primary row is decided and every decided primary row
//     says the same (undecided rows do not count against it); "mixed:
//     primary rows disagree" when the decided rows say different things
//     (better and worse, or a neutral row's higher beside another's
//     better); a declared row may carry an aim (Key.Aim, written
//     "cpu file system:share_pct:lower"): on a metric without a good
//     direction of its own the aimed-for change is then better and the
//     other worse, so a remedy that means to lower a share can be decided
//     better beside its operations' rows; n/a when every declared row is missing or n/a (no value
//     on a side, or not testable: Row.Note); otherwise the comparison's
//     undecided verdict: "no significant difference" with rounds,
//     "inconclusive: one round each" with one run per side (also when
//     the primary rows present have equal values on both sides, so
//     nothing was tested).
//   - The verdict line (PrimaryVerdict.Line; the same in compare's text
//     and Markdown, in JSON as primary.line and in ab's VERDICT line)
//     names the tested primary rows Holm ran over, each primary row that
//     could not be tested with the reason (PrimaryVerdict.Untested:
//     too few points or rounds, no samples, nothing varies), or says
//     that no primary row could be tested; it counts the exploratory rows
//     listed and tested ("36 rows, 15 tested"): a row without a p-value
//     (n/a, or equal values on both sides) is listed but not in Holm's m.
//   - Every other row is exploratory: Holm over the exploratory rows
//     alone (one family, as without primaries), printed under its own
//     heading, never the verdict. A chance hit among them does not make
//     the experiment's verdict; the A/A calibration
//     (examples/ab-calibration.sh) measures the primary verdict's false
//     rate against the nominal alpha.
//   - The declaration must come before the runs (a remedy's registration
//     or the command line): choosing the primary row after seeing the
//     table would reintroduce the multiplicity Holm removes. Declared
//     rows the comparison lacks (an operation the workload does not
//     have) are listed as missing and take no part.
//
// Without Options.Primary everything is one family, as before.
//
// # Noise guard
//
// A neighbour's load moves latencies through starvation: the server's
// processes and erplab's load generator are runnable but wait for a CPU.
// CPU shares do not show it on a saturated host (both sides read ~99 %
// busy while the server gets less of it), so the guard measures the
// waiting itself. The sampler records per sample (sampler.Sched) the
// time the postmaster's process tree (every thread) and erplab's own
// threads ran and spent runnable but not running (the run delay of
// /proc/<pid>/task/<tid>/schedstat, the kernel's
// Documentation/scheduler/sched-stats.rst), with the host's steal time
// (sampler.Noise.Steal).
//
// The rule, per comparison:
//
//   - Per run, the contention ρ = (run delay of the server's tasks and
//     erplab's threads + their stolen time) / (the time they ran), over
//     the observation samples after the warm-up; the stolen time is
//     estimated as their run time × steal / (host busy - steal). ρ = 1
//     means a CPU-bound step took twice its CPU time. Per side, ρ is the
//     mean over its rounds. Unlike the run delay per operation it does
//     not grow with the side's own work (a slow query waits more because
//     it runs more, not because the host is busier).
//   - The contention ratio F = (1+ρ_B)/(1+ρ_A) is the factor by which
//     waiting for CPUs alone slows CPU-bound work on B against A. The
//     limit L = max(F, 1/F)^StarvationAmplification (2): the queues in
//     front of a starved server (pool, connections, the virtual users'
//     closed loop) move latency and throughput more than the CPU-bound
//     steps themselves.
//   - Short operations are not scaled but shifted: one wait for a CPU
//     of a few ms multiplies a sub-ms latency. Per side, S is the run
//     delay (with the stolen time) per executed operation, ms: the delay
//     per second over the executions per second of the scored
//     intervals. The extra delay X = S_more·(1 - ρ_less/ρ_more) is the
//     run delay per operation the more contended side had beyond what
//     the other side's contention would have given its operations.
//   - A decided row (better, worse, higher, lower) is withheld, its
//     verdict "inconclusive: starvation differed" (Starved), when both
//     its values are positive and the starvation difference could
//     explain it (NoiseReport.Explains): max(B/A, A/B) <= L, or, for a
//     latency row (p50, p95, p99), |B-A| <= X. A latency row whose
//     slower side is the less contended one is never withheld (its
//     starvation would have made it faster). A larger effect stands,
//     whatever the starvation: a 177x faster operation (#31: p50 2,130
//     -> 12 ms, the foreign CPU 76 against 96 %) is better unless the
//     contention ratio exceeds 13 or its CPU-bound time under the
//     baseline's extra contention accounts for 2,118 ms. Rows with a
//     value of 0 or less on a side are not scalings and are not
//     withheld.
//
// Calibration (testdata/starved, record-starved.sh): an A/A of 3 rounds a
// side of the smoke workload on a 2-core host saturated by others, with
// `erplab stress --cpu 4` beside one side: ρ 4.4 against 11.4 (F 2.3,
// L 5.3); the hog cut throughput by a third and raised the p50 of the
// operations 2 to 8 times, and all 7 rows decided without the guard are
// withheld
// (the foreign CPU moved from 84.6 to 90.1 %, which the former
// share-based guard took for the same load); every latency row, decided
// or not, is explained (item_lookup's p50 rose 8 times, 0.3 -> 2.6 ms,
// within X = 10.8 ms). A commit_delay of 40 ms beside the hog against
// the quiet side (F 0.38, L 7.0): post_order's and temp_churn's p50 (17
// and 7 times) stay better, throughput rows are withheld.
//
// The noise line gives per side ρ, the ratio, the server's and erplab's
// tasks waiting for a CPU on average, the run delay per executed
// operation and steal, then for information the foreign CPU (host busy
// minus the server's and erplab's), the foreign runnable tasks and the
// server's CPU. Runs without schedstat figures (a remote server, older
// files, a kernel without schedstat) say so and are not guarded;
// Options.NoiseGuardOff (or a negative MaxForeignDiff, recipes of the
// former guard) turns the guard off.
//
// # Small or constant figures
//
// With rounds, a row whose per-round values are the same within each
// side (the same small count every round) has no variance to test with:
// it gets the p-value of an exact permutation test for completely
// separated samples, 2/C(nA+nB, nA) (0.1 for 3 against 3) and no
// interval, so it is never better or worse (it reads "no significant
// difference"; Row.Note says why there is no interval).
//
// An operation's APDEX is such a row whenever each side's executions
// stay in one APDEX zone (#31: or_subquery_report's p95 fell 268 -> 89
// ms around its 100 ms target, its APDEX 0.5 -> 1 in both rounds, p
// 0.33 over 2 rounds a side, so "no significant difference"). A remedy
// aimed at one key operation therefore declares that operation's p95
// with its APDEX: the p95 varies from round to round and takes Welch's
// t, and the verdict rule (a decided primary row, no decided row
// disagreeing) lets it decide when the APDEX cannot. Before the first
// run `erplab ab` prints its plan (experiment.NewPlan): per primary row
// the smallest p-value it can reach with the rounds (2/C(2n, n) for a
// row that can be constant, none for Welch's t) against Holm's first
// step alpha/k, and one line per row that cannot reach it with the
// change that would (more rounds, the operation's p95, more executions).
//
// # Percentiles of few executions
//
// An operation's p50, p95 and p99 rows are tested only when every run of
// both sides has at least 2, 20 and 100 successful scored executions of
// it (1/(1-q)). With fewer, HdrHistogram's quantile is the run's slowest
// execution: a maximum, which one stall of a shared host decides (a CPU
// hog's worst second, a checkpoint), so a row of per-round maxima
// compares the hosts' worst moments, not the configurations. Such a row
// reads n/a with the note "fewer than 20 executions in a run (7): its
// p95 is its slowest execution, not tested". Found in issue 31's A/A
// acceptance on a saturated host: stock_balance_report, 6-10 executions
// a run, p95 (= p99 = max) 4.9 s against 1.2 s over 3 rounds a side,
// p 3e-5, with nothing differing but the load beside the server. The
// operation's APDEX (every execution counts) and, with more executions
// (--duration, --mix), its percentiles decide instead; erplab ab's plan
// says so before the runs.
//
// # Warnings
//
// Comparison.Warnings names what differs besides the variant: the
// workload, the scale of the data the runs ran on (the workload's
// data_scale when it records one, else the requested scale), or the
// scored duration by more than 10 %.
package compare
