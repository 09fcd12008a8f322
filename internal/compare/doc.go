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
//     dependence inside a run, not the run-to-run variation, so a row it
//     cannot decide reads "inconclusive: one round each" rather than "no
//     significant difference".
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
// family-wise error rate Options.Alpha). A row is better or worse (higher
// or lower for neutral rows) only when it is significant after Holm and
// its whole 95 % interval lies beyond the minimum effect MinDelta =
// max(Options.MinEffect·|A|, the metric's floor): APDEX 0.01, latencies
// 1 ms, throughput 0.1/s, error rate 0.5 points, wait share 2 points,
// server CPU 1 point of all CPUs, temp files 0.1/s, temp bytes 64 KiB/s,
// catalog growth 64 KiB. The floors keep a difference between near-zero
// values (iowait 0.00 -> 0.14 %) from being "worse". Otherwise a row is
// "no significant difference" (rounds) or "inconclusive: one round each"
// (single runs); rows whose values do not vary at all (no errors on
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
//     effect. The verdict is, in this order: "inconclusive: foreign load
//     differed" when the noise guard downgraded a primary row (one that
//     would have been decided); better, worse, higher or lower when at
//     least one primary row is decided and every decided primary row
//     says the same (undecided rows do not count against it); "mixed:
//     primary rows disagree" when the decided rows say different things
//     (better and worse, or a neutral row's higher beside another's
//     better); n/a when every declared row is missing or n/a (no value
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
// The sampler records per sample (sampler.Noise) the CPU of the server's
// process tree, of erplab itself, and the rest of the host's busy time:
// the foreign load, plus steal time, the run queue and the foreign
// runnable tasks (runnable tasks that are neither the server's nor
// erplab's). The comparison's noise line gives their means per side
// (mean of per-round means with rounds). Every decided row reads
// "inconclusive: foreign load differed" (the difference may be the
// neighbour's) when
//
//   - the foreign CPU of the two sides differs by more than
//     Options.MaxForeignDiff (default 10 percentage points of all CPUs:
//     on a 2-core host, a fifth of a core busy for the whole run), or
//   - the foreign runnable tasks differ significantly (p < 0.05, by the
//     row method: Welch over rounds, or the block bootstrap of one run
//     each) and by more than RunnablePerCPU (0.5) tasks per CPU. On a
//     saturated host the foreign CPU cannot grow (the server's share
//     shrinks instead), but the number of competitors does.
//
// Runs without these figures (remote servers, older files) say so and
// are not guarded. The foreign load is counted from /proc: a process
// started by erplab's own process tree (an in-process stress, a
// --run-hook child that is still attached) counts as erplab's.
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
// # Warnings
//
// Comparison.Warnings names what differs besides the variant: the
// workload, the scale of the data the runs ran on (the workload's
// data_scale when it records one, else the requested scale), or the
// scored duration by more than 10 %.
package compare
