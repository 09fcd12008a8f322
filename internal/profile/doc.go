// Package profile samples where a local PostgreSQL server spends its CPU,
// with Linux perf, and attributes the samples to PostgreSQL functions and
// to subsystems (lock manager, shared invalidation, catalog access, file
// system, memory and THP, ...): the measurement that found the causes of
// the field's temp-table trouble (docs/field-notes.md; CONTEXT.md §1, §3,
// §4), where the pg_stat_activity sampler only showed where to dig.
//
// # Recording
//
// Start runs
//
//	perf record -a -g -B -k CLOCK_MONOTONIC -e cpu-clock -F 499 -o DIR/perf.data --quiet -D -1 --control fifo:DIR/ctl,DIR/ack
//
// (every CPU, frame-pointer call graphs, no build-id post-processing at
// exit, the software CPU clock: VMs often have no hardware counters),
// started with sampling disabled and enabled through the control fifo
// once perf has read every process's maps from /proc (seconds on a busy
// host; the caller's window starts at the acknowledgement), until Stop
// sends it SIGINT. A Session also lists the postmaster's descendants
// every 200 ms, besides perf's FORK records, reading only the tree's
// /proc/PID/task/TID/children files (hostfacts.Descendants: 0.18 ms of
// CPU per scan here; a stat of every process cost 5.4-13.1 ms per scan on
// this host under load, 1.4-3.3 % of its two CPUs). Stop then reads the data back with `perf
// script --show-task-events --ns -F comm,pid,tid,time,ip,sym,dso` and
// Parse keeps the samples of the server's processes with their times. 499 Hz is prime, so sampling does not beat with
// 100 Hz or 1000 Hz timers.
//
// Why every CPU and not `perf record -p POSTMASTER`: perf does follow
// children forked after it attached (inherit), yet with PostgreSQL 15 on
// Linux 6.18 and perf 6.1 `perf record -p` of the postmaster recorded no
// sample and no FORK record of the backends the postmaster forked during
// the recording, while `perf stat -p` of the same postmaster counted
// their CPU time and `perf record -p` of a shell followed its children
// (measured here). `-u postgres` would take every server of that OS user
// (a host often runs several). So the recording is system-wide and the
// server's processes are picked out afterwards: perf writes a FORK record
// for every process that exists at the start (with its parent, from
// /proc) and for every fork after, so Parse rebuilds the postmaster's
// process tree exactly over the window, backends that start and end
// within it included, and a pid reused by an unrelated process is not
// taken. The cost of every CPU is perf's: at 499 Hz it handles 499
// samples per second per busy CPU (idle CPUs are not sampled); see
// Overhead.
//
// # Overhead
//
// What profiling adds, split (measure_test.go, ERPLAB_PROFILE_MEASURE=1):
//
//   - perf's sampling, in the interrupted task: each sample is an hrtimer
//     interrupt on that CPU that walks the frame-pointer stack (-g) and
//     writes the record to perf's ring buffer. This kernel has no IRQ
//     time accounting, so the time is charged to whatever ran: the
//     backends, and on the same host the load generator and every other
//     process (perf -a). TestMeasureSampleCost measures it on a thread
//     spinning at call depth 32 (interrupt gaps during which the
//     thread's CPU clock advanced): 12-25 µs per sample with -g, 9-12 µs
//     without, in this 2-CPU VM at load average 20-30, i.e. 0.6-1.2 % of
//     each busy CPU at 499 Hz (0.5-0.6 % without -g; the interrupt and
//     the VM exits around it are most of it). It scales with the
//     frequency: --freq 99 costs a fifth.
//   - perf's own process (draining the ring buffers to perf.data): under
//     the 10 ms accounting tick in every measured round (< 0.2 % of the
//     CPUs); its start-up (reading every process's maps) and perf
//     script's parse come before and after the window.
//   - the Session: the /proc poll, 0.18 ms of CPU per 200 ms (0.09 % of
//     one CPU), and in a run the opmap timeline (a clock read and an
//     uncontended lock per Begin and End); TestMeasureOverhead's
//     session-only variant showed no difference from off within a loaded
//     host's noise (client CPU per transaction 0.98 [0.82, 1.23]).
//
// So the throughput cost is the per-sample cost times the busy CPUs, about
// 1 % at 499 Hz here, more when the load generator shares the server's
// CPUs (it is sampled too). TestMeasureOverhead runs a select-only load
// under off, perf 499 Hz -g (erplab's), 499 Hz without -g, 99 Hz -g and
// the session without perf, the order rotated each round after a warm-up
// pass, and prints per variant the tps ratio to off (ratio of medians
// with a bootstrap interval, and the ratios to the off slot of the same
// round) and the server's and client's CPU per transaction; on a shared
// host throughput varies by 2-5x between slots and this does not
// resolve 3 %: run it on a quiet machine. What was not worth changing:
// -c instead of -F (for the hrtimer-based software clock the kernel turns
// a frequency into the fixed period NSEC_PER_SEC/F, perf_swevent_init_hrtimer:
// the same sampling), --mmap-pages, perf.data on tmpfs, nice or CPU
// affinity for perf (perf's own CPU is below the tick); recording
// without -g halves the per-sample cost but classifies by the leaf only
// ("other" 24 % -> 65 % of a select-only load), so call graphs stay.
//
// # Which server
//
// Locate finds the postmaster from a session of the server itself: its
// backend (pg_backend_pid) must be a local postgres process whose parent
// is a postgres process started at pg_postmaster_start_time (within 5 s)
// and running in data_directory (the postmaster's working directory,
// when both can be read). Otherwise the server is remote (or in another
// PID namespace) and an *Unavailable error says so in one line. --pid
// gives the roots directly.
//
// # When it cannot run
//
// Check returns an *Unavailable error, one line, when perf is not
// installed ("apt-get install linux-perf" on Debian), does not run for the
// kernel, or is not permitted: system-wide sampling needs root (or
// CAP_PERFMON) or kernel.perf_event_paranoid <= 0. kernel.kptr_restrict
// (2, or 1 for non-root) hides kernel symbols: Check warns, kernel frames
// become "[kernel]" and kernel time is classified by its user-space
// caller (the glibc wrappers unlink, open64, recv, epoll_wait are in the
// table for that).
//
// # Attribution
//
// Self counts a sample for the function on the CPU (the leaf), total for
// every function on its stack (once per sample). Frames perf cannot name
// (static functions of a stripped postgres binary) are "[object]", e.g.
// "[postgres]", consecutive ones merged; kernel frames carry the suffix
// "_[k]" (as FlameGraph's stackcollapse-perf.pl --kernel).
//
// Each sample goes to one subsystem (Classify): a claiming function
// anywhere on the stack wins (XLogFlush, XLogWrite, issue_xlog_fsync,
// XLogBackgroundFlush: WAL, though their fsync ends in ext4); else the
// specific signature nearest the leaf (lock manager, shared invalidation,
// catalog access, WAL, file system, memory and THP, network, scheduler
// and waits: what the CPU is stuck in, wherever it was called from); else
// the generic signature nearest the leaf (parser, planner, executor, heap
// index and buffers: the phase of the query); else "other" (generic code
// such as dynahash or memcpy with no signature above it). A generic
// helper (hash_search_with_hash_value) has no signature of its own, so
// it counts for its caller: under LockAcquireExtended it is lock manager
// time, under a catalog cache lookup catalog time.
//
// Signatures (signatures.go holds the full lists; kernel patterns match
// kernel frames only; compiler clone suffixes such as ".isra.0" are
// ignored):
//
//	lock manager         LWLockAcquire, LWLockAttemptLock, LWLockRelease, LockAcquireExtended,
//	                     LockRelationOid, LockReleaseAll, FastPath*, ProcSleep, s_lock
//	                     (src/backend/storage/lmgr/lwlock.c, lock.c, lmgr.c, s_lock.c)
//	shared invalidation  SIInsertDataEntries, SIGetDataEntries, ReceiveSharedInvalidMessages,
//	                     AcceptInvalidationMessages, CatCacheInvalidate, InvalidateSystemCaches,
//	                     PrepareToInvalidateCacheTuple, CacheInvalidateHeapTuple, AtEOXact_Inval,
//	                     RelationCacheInvalidate* (storage/ipc/sinval.c, sinvaladt.c,
//	                     utils/cache/inval.c, catcache.c, relcache.c)
//	catalog access       SearchCatCache*, SearchSysCache*, systable_*, CatalogTupleInsert/Update/
//	                     Delete, RelationBuildDesc, heap_create_with_catalog, index_create,
//	                     performDeletion, findDependentObjects, recordDependencyOn*, DefineRelation,
//	                     ExecuteTruncate, lsyscache get_* (utils/cache/, catalog/, access/index/
//	                     genam.c, commands/tablecmds.c)
//	parser               raw_parser, base_yyparse, core_yylex, parse_analyze*, transform*,
//	                     QueryRewrite (parser/, rewrite/, tcop/postgres.c)
//	planner              standard_planner, subquery_planner, make_one_rel, join_search_one_level,
//	                     create_*_path, cost_*, eqjoinsel, clauselist_selectivity,
//	                     get_relation_info, GetCachedPlan (optimizer/, utils/cache/plancache.c)
//	executor             Exec*, standard_ExecutorRun, PortalRun*, tts_*, tuplesort_*, printtup
//	                     (executor/, tcop/pquery.c, access/common/printtup.c)
//	heap, index, buffers heap_*, heapgettup*, HeapTupleSatisfies*, _bt_*, bt*, index_*, ReadBuffer*,
//	                     PinBuffer, LockBuffer, visibilitymap_*, GetSnapshotData (access/heap/,
//	                     access/nbtree/, access/index/, storage/buffer/, utils/time/snapmgr.c)
//	WAL                  XLogInsert, XLogInsertRecord, XLogFlush, XLogWrite, issue_xlog_fsync,
//	                     XLogRegister*, WALInsertLockAcquire (access/transam/xlog.c, xloginsert.c)
//	file system          PostgreSQL: mdcreate, mdunlink*, mdtruncate, smgr*, FileSync,
//	                     pg_fsync (storage/smgr/md.c, storage/file/fd.c); kernel: ext4_*, xfs_*,
//	                     jbd2_*, find_get_block_common, recently_deleted, find_inode_bit,
//	                     __find_get_block, vfs_*, path_openat, do_unlinkat, do_truncate,
//	                     do_fsync, d_alloc*, __d_lookup*, the open/unlink/truncate/fsync/pread/
//	                     pwrite system call entries, tmpfs's shmem_unlink, shmem_create
//	                     (fs/ext4, fs/xfs, fs/jbd2, fs/namei.c, open.c, buffer.c, mm/shmem.c)
//	memory and THP       exc_page_fault, handle_mm_fault, do_anonymous_page, do_huge_pmd_*,
//	                     clear_page*, clear_huge_page, folio_zero_user, compact_*,
//	                     isolate_migratepages*, migrate_pages*, khugepaged*, __alloc_pages*,
//	                     mmap/munmap/brk/madvise, zap_pte_range (mm/memory.c, huge_memory.c,
//	                     compaction.c, migrate.c, page_alloc.c, khugepaged.c)
//	network              secure_read, secure_write, pq_getbyte, pq_flush, recv/send (libpq/
//	                     pqcomm.c, be-secure.c); kernel: tcp_*, unix_stream_*, unix_*, sock_*,
//	                     ip_*, skb_*, sendto/recvfrom entries, net_rx_action (net/)
//	scheduler and waits  WaitEventSetWait, WaitLatch, PGSemaphoreLock, pg_usleep, epoll_wait
//	                     (storage/ipc/latch.c, port/posix_sema.c); kernel: schedule, __schedule,
//	                     finish_task_switch, try_to_wake_up, ep_poll, futex_*, semop
//	                     (kernel/sched/, kernel/futex/, fs/eventpoll.c)
//
// Summary.Marks adds total shares of kernel groups the doctor reads:
// compaction (compact_*, isolate_migratepages*, migrate_pages*),
// huge_page_clearing (clear_huge_page, folio_zero_user) and page_faults
// (exc_page_fault).
//
// # Per key operation
//
// In a run (run --profile) the engine marks each key operation's start
// and end on its connection's backend in package opmap (Begin, End); a
// Timeline started with the recording keeps them as intervals (pid,
// operation, from, to) on Go's monotonic clock, which on Linux is
// CLOCK_MONOTONIC, the clock perf stamps its samples with under -k
// CLOCK_MONOTONIC. NewClock ties the two (CLOCK_MONOTONIC read before and
// after time.Now, the tightest of 16 pairs: its half-gap, typically
// 0.1-0.3 µs, bounds the alignment error; no drift, one clock).
// AttributeOps gives each sample to the interval of its pid holding its
// time and summarizes each operation's samples (top subsystems, top
// functions by self share; Summary.Operations, OpAttribution). What the
// backend does outside the engine's Begin..End (after sending the result,
// background processes) stays unattributed and is counted. The engine's
// hot path is unchanged: with a timeline each Begin and End adds a clock
// read and an uncontended lock, without one an atomic load.
//
// # Output
//
// Summary is what the results keep (extra.profile): subsystem shares,
// the top functions, and the TopStacks most frequent folded stacks (the
// rest counted in folded_omitted); Parsed.WriteFolded writes every stack
// for external tools (flamegraph.pl, speedscope, inferno); FlameGraph
// draws a self-contained SVG (no scripts: each frame's name and share are
// in its <title>, shown on hover), coloured by subsystem.
package profile
