// Package disk compares candidate storage directories (a disk, an NVMe
// mount, /dev/shm, a fresh tmpfs) the way PostgreSQL uses them: micro
// patterns (8 KiB random reads and writes, WAL-like synchronous 8 KiB
// writes as pg_test_fsync does them, the temp-table file churn) and macro
// operations of the ERP workload on a tablespace placed on each path
// (MacroAll). CONTEXT.md section 2 is the reason: raw device speed does
// not predict database speed, so both are measured and ranked.
//
// Every file is created under a fresh directory erplab-disk-* (micro),
// erplab-ts-* (tablespace) or erplab-wal-* (PutWALOn) inside the
// candidate path, and removed when the measurement ends, also when ctx is
// cancelled (Ctrl-C). Each of these directories, and the tmpfs of
// MountTmpfs, is recorded in erplab's crash-safe record (package
// leftover) before it is made: after a kill -9 the next erplab command
// removes them (and unmounts the tmpfs) with one line saying so.
//
// # Repeats and rounds
//
// On a shared machine one measurement says little: the same directory
// gave wal_8k_fdatasync 4,928 and then 15,174 ops/s minutes apart. So
// every figure (each micro pattern's ops/s, the data load's and each
// key operation's time) is measured Repeats times (default 3) on every
// path, and the repeat, not the single I/O or the second, is the unit of
// replication. The repeats are interleaved: for one pattern or
// operation, round r measures every path once, in the order Order(n, r)
// (the paths sorted by name, rotated left by r: A B, B A, A B for two
// paths), so a neighbour's burst or a slow drift of the host falls on
// every path alike instead of on the one measured last. The schedule is
// built from the paths sorted by name, so giving the same paths in
// another order runs exactly the same schedule. Each figure is shown as
// the median of its repeats with their range (min-max); the repeats
// themselves are kept in the results in round order, with their round
// and position in the round.
//
// # Ties and ranks
//
// Two paths differ on a figure only when both hold (Rule):
//
//   - the exact two-sided Mann-Whitney (Wilcoxon rank-sum) test of their
//     repeats gives p <= Alpha (default 0.10). The p-value is computed by
//     enumerating every split of the pooled repeats into two groups of
//     the observed sizes (a permutation test of the U statistic, ties
//     counting one half: H. B. Mann and D. R. Whitney, "On a test of
//     whether one of two random variables is stochastically larger than
//     the other", Ann. Math. Statist. 18 (1947) 50-60; M. Hollander,
//     D. A. Wolfe, E. Chicken, Nonparametric Statistical Methods, 3rd ed.,
//     Wiley 2014, section 4.1). It assumes only that repeats of one path
//     are exchangeable, which the interleaved rounds make plausible; and
//   - their medians differ by at least MinEffect (default 10 %): the
//     better median is at least 1.10 times the other, so 6.2 vs 6.4 ms is
//     a tie however consistent the repeats.
//
// Otherwise they are tied. A path's rank is 1 + the number of paths that
// differ from it and are better, so every path no other path beats has
// rank 1, and paths of equal rank are shown tied. This depends only on
// the pairwise verdicts, so the ranking is the same whatever order the
// paths are given in (Rank sorts by path name wherever nothing else
// decides). Pairs are tested one by one without a correction for the
// number of pairs or figures; the minimum effect is the guard against a
// chance separation of two near-equal paths.
//
// What 3 repeats can and cannot resolve: with 3 repeats per path there
// are C(6,3) = 20 splits, and the smallest two-sided p is 2/20 = 0.10,
// reached only when all 3 repeats of one path beat all 3 of the other
// (their ranges do not overlap). So with 3 repeats the test resolves
// exactly one outcome, complete separation, and a path whose ranges
// overlap the other's is tied however different the medians; it can
// never show evidence stronger than p = 0.10, and two identical paths
// are separated by chance with probability 0.10 per figure before the
// minimum effect is applied. With 4 repeats the smallest p is 2/70 =
// 0.029, with 5 it is 2/252 = 0.008, and one overlapping repeat is
// tolerated at α = 0.10 (p = 4/70 = 0.057 for 4+4, 0.016 for 5+5). Use
// --repeat 5 or more when a difference matters.
//
// # WAL on the candidate path
//
// By default the macro operations run in one throwaway server whose WAL
// stays in its data directory (under the system's temporary directory),
// so re-posting, whose cost is mostly WAL flushes, does not exercise the
// candidate device's fsync. With WAL on the path (PutWALOn), every path
// gets its own throwaway cluster whose pg_wal is moved to an erplab-wal-*
// directory on that path and replaced by a symbolic link, the layout
// initdb --waldir makes; tablespace and WAL then both sit on the
// candidate. This needs a server erplab started: the WAL of a server
// reached by a DSN cannot be moved from a client.
package disk
