package profile

import "strings"

// Subsystem names, in the order of tables and of extra.profile.subsystems.
const (
	SubLock     = "lock manager"
	SubSinval   = "shared invalidation"
	SubCatalog  = "catalog access"
	SubParser   = "parser"
	SubPlanner  = "planner"
	SubExecutor = "executor"
	SubAccess   = "heap, index and buffers"
	SubWAL      = "WAL"
	SubFS       = "file system"
	SubMemory   = "memory and THP"
	SubNetwork  = "network"
	SubSched    = "scheduler and waits"
	SubOther    = "other"
)

// Subsystems lists every subsystem in table order.
var Subsystems = []string{SubLock, SubSinval, SubCatalog, SubParser, SubPlanner, SubExecutor, SubAccess,
	SubWAL, SubFS, SubMemory, SubNetwork, SubSched, SubOther}

// signature names the functions of one subsystem. Patterns are exact
// names, "prefix*" or "*suffix"; kernel patterns match kernel frames
// only, user patterns user-space frames only. Specific subsystems name
// what a sample is stuck in wherever it sits on the stack; generic ones
// (parser, planner, executor, access) only say which phase of a query was
// running. The package doc gives the rule and the sources.
type signature struct {
	sub      string
	specific bool
	user     []string
	kernel   []string
}

// signatures is the table (package doc, "Signatures"). Sources are the
// PostgreSQL 15 source files named in the comments and the Linux kernel's
// function names (fs/, mm/, net/, kernel/sched/).
var signatures = []signature{
	{sub: SubWAL, specific: true, user: []string{
		// src/backend/access/transam/xlog.c, xloginsert.c; postmaster/walwriter.c
		"XLogInsert", "XLogInsertRecord", "XLogFlush", "XLogWrite", "issue_xlog_fsync", "XLogBeginInsert",
		"XLogRegister*", "XLogRecordAssemble", "XLogBackgroundFlush", "XLogSetAsyncXactLSN",
		"WALInsertLockAcquire*", "WaitXLogInsertionsToFinish", "XLogFileInit*", "AdvanceXLInsertBuffer", "WalWriterMain",
	}},
	{sub: SubSinval, specific: true, user: []string{
		// src/backend/storage/ipc/sinval.c, sinvaladt.c; utils/cache/inval.c, catcache.c, relcache.c
		"SIInsertDataEntries", "SIGetDataEntries", "SICleanupQueue", "SendSharedInvalidMessages",
		"ReceiveSharedInvalidMessages", "ProcessCatchupInterrupt", "HandleCatchupInterrupt",
		"AcceptInvalidationMessages", "LocalExecuteInvalidationMessage", "InvalidateSystemCaches*",
		"ProcessInvalidationMessages*", "AtEOXact_Inval", "AtEOSubXact_Inval", "CommandEndInvalidationMessages",
		"PrepareToInvalidateCacheTuple", "CacheInvalidateHeapTuple", "CacheInvalidateRelcache*", "CacheInvalidateSmgr",
		"RegisterCatcacheInvalidation", "AddCatcacheInvalidationMessage", "AddRelcacheInvalidationMessage",
		"CatCacheInvalidate", "CatalogCacheFlushCatalog", "ResetCatalogCaches", "CatCacheRemoveCTup", "CatCacheRemoveCList",
		"RelationCacheInvalidate*", "RelationFlushRelation", "RelationClearRelation", "CallSyscacheCallbacks",
		"InvalidateCatalogSnapshot",
	}},
	{sub: SubLock, specific: true, user: []string{
		// src/backend/storage/lmgr/lwlock.c, lock.c, lmgr.c, s_lock.c
		"LWLockAcquire", "LWLockAttemptLock", "LWLockRelease", "LWLockWaitListLock", "LWLockWakeup",
		"LWLockQueueSelf", "LWLockConditionalAcquire", "LWLockAcquireOrWait", "LWLockWaitForVar",
		"LockAcquire", "LockAcquireExtended", "LockRelease", "LockReleaseAll", "LockRelationOid",
		"UnlockRelationOid", "LockRelation", "UnlockRelation", "LockRelationIdForSession", "LockDatabaseObject",
		"LockSharedObject", "ConditionalLockRelationOid", "FastPathGrantRelationLock", "FastPathUnGrantRelationLock",
		"FastPathTransferRelationLocks", "SetupLockInTable", "LockCheckConflicts", "GrantLock", "ProcSleep",
		"LockTagHashCode", "s_lock", "perform_spin_delay",
	}},
	{sub: SubCatalog, specific: true, user: []string{
		// src/backend/utils/cache/catcache.c, syscache.c, relcache.c, lsyscache.c;
		// catalog/indexing.c, heap.c, index.c, dependency.c, pg_depend.c, pg_type.c;
		// access/index/genam.c; commands/tablecmds.c (DDL entry points)
		"SearchCatCache*", "SearchSysCache*", "SearchCatCacheMiss", "CatalogCacheCreateEntry", "SearchCatCacheList",
		"GetSysCacheOid", "SysCacheGetAttr", "systable_*", "CatalogTupleInsert*", "CatalogTupleUpdate",
		"CatalogTupleDelete", "CatalogIndexInsert", "CatalogOpenIndexes", "CatalogCloseIndexes",
		"RelationBuildDesc", "RelationIdGetRelation", "RelationBuildTupleDesc", "RelationInitIndexAccessInfo",
		"RelationBuildLocalRelation", "RelationSetNewRelfilenode", "RelationGetIndexList", "RelationCacheInitializePhase3",
		"heap_create_with_catalog", "heap_drop_with_catalog", "heap_create", "index_create", "index_drop",
		"InsertPgClassTuple", "InsertPgAttributeTuples", "AddNewAttributeTuples", "AddNewRelationType", "TypeCreate",
		"StoreAttrDefault", "GetNewOidWithIndex", "GetNewRelFileNode", "GetNewObjectId",
		"performDeletion", "performMultipleDeletions", "deleteOneObject", "doDeletion", "findDependentObjects",
		"reportDependentObjects", "deleteDependencyRecordsFor*", "recordDependencyOn*", "recordMultipleDependencies",
		"DefineRelation", "RemoveRelations", "ExecuteTruncate*", "heap_truncate*", "DefineIndex", "RemoveTempRelations",
		"RemoveTempRelationsCallback", "PreCommit_on_commit_actions", "AtEOXact_RelationCache", "RelationForgetRelation",
		"get_attavgwidth", "get_rel_*", "get_typ*", "get_opfamily_*", "get_op_*", "get_func_*", "get_attnum",
		"OpernameGetOprid", "FuncnameGetCandidates", "RelnameGetRelid", "RangeVarGetCreationNamespace",
		"RangeVarAdjustRelationPersistence", "InitTempTableNamespace", "RangeVarGetRelidExtended",
	}},
	{sub: SubFS, specific: true, user: []string{
		// src/backend/storage/smgr/md.c, smgr.c; storage/file/fd.c
		"mdcreate", "mdunlink*", "mdtruncate", "mdopen*", "mdimmedsync", "mdsyncfiletag", "register_dirty_segment",
		"smgrcreate", "smgrdounlinkall", "smgrtruncate", "smgrimmedsync", "PathNameOpenFile*", "FileSync",
		"FileTruncate", "durable_unlink", "pg_fsync*", "pg_fdatasync",
		// glibc system call wrappers (classify kernel time when kernel symbols are hidden)
		"unlink", "__unlink", "__GI___unlink", "__libc_open*", "__GI___libc_open*", "open64", "__open64", "__GI___open64*", "__open64_nocancel", "ftruncate64", "__ftruncate64",
		"__libc_pread64", "__libc_pwrite64", "pread64", "pwrite64", "fsync", "fdatasync", "__fstat64", "lseek64", "__lseek64",
	}, kernel: []string{
		// fs/ext4, fs/xfs, fs/jbd2, fs/ (VFS: namei.c, open.c, dcache.c, inode.c, buffer.c, read_write.c, sync.c)
		"ext4_*", "__ext4_*", "xfs_*", "jbd2_*", "__jbd2_*", "recently_deleted", "find_get_block_common",
		"__find_get_block*", "find_inode_bit", "find_group_orlov", "get_orlov_stats", "__getblk*", "bdev_getblk", "mark_buffer_dirty*", "__brelse", "__bforget",
		"vfs_*", "do_sys_open*", "do_filp_open", "path_openat", "do_unlinkat", "do_rmdir", "do_truncate", "do_sys_ftruncate",
		"do_fsync", "filemap_*", "file_write_and_wait_range", "generic_file_*", "generic_perform_write",
		"iput*", "evict", "d_alloc*", "__d_lookup*", "d_lookup", "lookup_*", "link_path_walk", "walk_component",
		"__x64_sys_openat", "__x64_sys_open", "__x64_sys_unlink*", "__x64_sys_ftruncate", "__x64_sys_truncate",
		"__x64_sys_fsync", "__x64_sys_fdatasync", "__x64_sys_pread64", "__x64_sys_pwrite64", "__x64_sys_lseek",
		"__x64_sys_newfstat*", "__x64_sys_statx", "__x64_sys_mkdir*", "__x64_sys_rename*", "__x64_sys_sync_file_range",
		"ksys_lseek", "ksys_pread64", "ksys_pwrite64", "ksys_fadvise64_64", "__x64_sys_fadvise64",
		"shmem_file_*", "shmem_unlink", "shmem_mknod", "shmem_create", "shmem_setattr", "shmem_get_inode",
		"shmem_evict_inode", "shmem_undo_range", "shmem_truncate_range", "simple_lookup",
	}},
	{sub: SubMemory, specific: true, kernel: []string{
		// mm/memory.c, mm/huge_memory.c, mm/compaction.c, mm/migrate.c, mm/page_alloc.c, mm/khugepaged.c, mm/mmap.c
		"asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "handle_mm_fault", "__handle_mm_fault",
		"do_anonymous_page", "do_fault", "do_wp_page", "wp_page_copy", "do_huge_pmd_*", "clear_page*",
		"clear_huge_page", "folio_zero_user", "clear_subpage", "copy_huge_page", "compact_*", "isolate_migratepages*",
		"isolate_freepages*", "migrate_pages*", "try_to_compact_pages", "__alloc_pages*", "get_page_from_freelist",
		"rmqueue*", "alloc_pages*", "folio_alloc*", "vma_alloc_folio*", "khugepaged*", "collapse_huge_page",
		"hpage_collapse_scan_pmd", "__x64_sys_mmap", "__x64_sys_munmap", "__x64_sys_brk", "__x64_sys_madvise",
		"__x64_sys_mremap", "do_mmap", "__do_munmap", "do_vmi_munmap", "unmap_page_range", "zap_pte_range",
		"zap_pmd_range", "tlb_finish_mmu", "release_pages", "free_pages_and_swap_cache", "free_unref_page*",
		"free_unref_folios", "shmem_fault", "filemap_fault", "filemap_map_pages", "do_read_fault", "do_shared_fault",
	}},
	{sub: SubNetwork, specific: true, user: []string{
		// src/backend/libpq/pqcomm.c, be-secure.c
		"secure_read", "secure_write", "secure_raw_read", "secure_raw_write", "pq_getbyte", "pq_getmessage",
		"pq_getbytes", "pq_flush", "pq_putmessage*", "pq_startmsgread", "internal_flush", "socket_*",
		"__libc_recv", "__libc_send", "recv", "send", "__send", "__recv",
	}, kernel: []string{
		// net/
		"tcp_*", "__tcp_*", "unix_stream_*", "unix_*", "sock_*", "__sock_*", "sk_*", "__sk_*", "inet_*",
		"__sys_sendto", "__sys_recvfrom", "__x64_sys_sendto", "__x64_sys_recvfrom", "__x64_sys_sendmsg",
		"__x64_sys_recvmsg", "ip_*", "__ip_*", "ip6_*", "net_rx_action", "__netif_receive_skb*", "netif_*",
		"__dev_queue_xmit", "dev_hard_start_xmit", "loopback_xmit", "skb_*", "__skb_*", "consume_skb",
		"kfree_skb*", "__kfree_skb", "process_backlog", "__napi_poll",
	}},
	{sub: SubSched, specific: true, user: []string{
		// src/backend/storage/ipc/latch.c; port/posix_sema.c, pg_sema (sysv_sema.c)
		"WaitEventSetWait*", "WaitLatch*", "PGSemaphoreLock", "PGSemaphoreUnlock", "pg_usleep", "SetLatch",
		"epoll_wait", "__GI_epoll_wait", "__futex_abstimed_wait*", "semop", "semtimedop", "__kill", "kill", "__select", "__nanosleep", "clock_nanosleep*",
	}, kernel: []string{
		// kernel/sched/, kernel/futex/, fs/eventpoll.c
		"schedule*", "__schedule", "finish_task_switch*", "__switch_to*", "pick_next_task*", "try_to_wake_up",
		"wake_up_*", "__wake_up*", "ttwu_*", "enqueue_task*", "dequeue_task*", "update_curr", "update_load_avg",
		"__x64_sys_epoll_wait", "do_epoll_wait", "ep_poll", "ep_send_events", "__x64_sys_futex", "futex_*",
		"__x64_sys_semop", "__x64_sys_semtimedop", "do_semtimedop", "__x64_sys_nanosleep", "hrtimer_nanosleep",
		"do_nanosleep", "__x64_sys_select", "do_select", "__x64_sys_pselect6", "__x64_sys_poll", "do_sys_poll",
		"__x64_sys_kill", "kill_pid_info", "__send_signal*", "complete_signal",
	}},
	{sub: SubParser, user: []string{
		// src/backend/parser/, tcop/postgres.c, rewrite/
		"raw_parser", "base_yyparse", "base_yylex", "core_yylex", "scanner_*", "pg_parse_query", "parse_analyze*",
		"transform*", "pg_analyze_and_rewrite*", "pg_rewrite_query", "QueryRewrite", "RewriteQuery", "fireRIRrules",
		"make_parsestate", "addRangeTableEntry*", "makeColumnRef", "makeTypeName*",
	}},
	{sub: SubPlanner, user: []string{
		// src/backend/optimizer/
		"pg_plan_query", "pg_plan_queries", "planner", "standard_planner", "subquery_planner", "grouping_planner",
		"query_planner", "make_one_rel", "set_base_rel_*", "set_rel_*", "set_plain_rel_*", "standard_join_search",
		"join_search_one_level", "make_join_rel", "make_rels_by_*", "add_paths_to_joinrel", "add_path", "add_partial_path",
		"create_*_path", "create_*_paths", "create_plan", "create_plan_recurse", "create_scan_plan", "create_*_plan",
		"cost_*", "final_cost_*", "initial_cost_*", "clauselist_selectivity*", "clause_selectivity*", "eqsel*",
		"eqjoinsel*", "scalarineqsel*", "neqjoinsel", "restriction_selectivity", "join_selectivity",
		"build_simple_rel", "build_join_rel", "get_relation_info", "preprocess_*", "expression_planner*",
		"set_plan_references", "eval_const_expressions", "estimate_rel_size", "get_relation_statistics",
		"match_clause_to_index", "build_index_paths", "create_index_paths", "generate_*", "set_cheapest",
		"PortalStart", "GetCachedPlan", "BuildCachedPlan", "RevalidateCachedQuery", "CreateCachedPlan",
	}},
	{sub: SubAccess, user: []string{
		// src/backend/access/heap/, access/nbtree/, access/index/indexam.c, access/table/,
		// storage/buffer/bufmgr.c, freelist.c; access/heap/visibilitymap.c; utils/time/snapmgr.c
		"heap_*", "heapam_*", "heapgettup*", "heapgetpage", "HeapTupleSatisfies*", "_bt_*", "bt*", "index_*",
		"table_*", "ReadBuffer*", "ReleaseBuffer", "BufferAlloc", "PinBuffer*", "UnpinBuffer*", "LockBuffer",
		"MarkBufferDirty*", "StrategyGetBuffer", "BufTableLookup", "BufTableInsert", "FlushBuffer", "IncrBufferRefCount",
		"ReleaseAndReadBuffer", "visibilitymap_*", "GetSnapshotData", "GetTransactionSnapshot", "XidInMVCCSnapshot",
		"TransactionIdIsInProgress", "TransactionIdDidCommit", "TransactionLogFetch", "SimpleLruReadPage*",
		"_hash_*", "hashgettuple", "hashinsert", "gist*", "gin*", "brin*", "toast_*", "heap_tuple_*", "detoast_*",
		"RelationGetBufferForTuple", "RelationAddBlocks", "GetPageWithFreeSpace", "fsm_*",
	}},
	{sub: SubExecutor, user: []string{
		// src/backend/executor/, tcop/pquery.c
		"Exec*", "ExecutorRun", "standard_ExecutorRun", "ExecutorStart", "standard_ExecutorStart", "ExecutorEnd",
		"standard_ExecutorEnd", "ExecutorFinish", "standard_ExecutorFinish", "InitPlan", "ExecInitNode",
		"PortalRun*", "tts_*", "slot_*", "execTuples*", "MultiExecHash", "ExecHashTableInsert", "tuplesort_*",
		"tuplestore_*", "printtup*", "SendRowDescriptionMessage", "exec_simple_query_dummy",
	}},
}

// match reports whether name matches one of patterns.
func match(name string, patterns []string) bool {
	for _, p := range patterns {
		switch {
		case strings.HasSuffix(p, "*"):
			if strings.HasPrefix(name, p[:len(p)-1]) {
				return true
			}
		case strings.HasPrefix(p, "*"):
			if strings.HasSuffix(name, p[1:]) {
				return true
			}
		case name == p:
			return true
		}
	}
	return false
}

// frameSub is the subsystem a frame's function belongs to and whether it
// is specific; "" when no signature names it.
func frameSub(f Frame) (string, bool) {
	if i := strings.IndexByte(f.Func, '.'); i > 0 && f.Kernel {
		f.Func = f.Func[:i] // a compiler clone: finish_task_switch.isra.0
	}
	for _, s := range signatures {
		pats := s.user
		if f.Kernel {
			pats = s.kernel
		}
		if match(f.Func, pats) {
			return s.sub, s.specific
		}
	}
	return "", false
}

// claims are functions that own everything they call: a WAL flush that
// ends in the file system's fsync is WAL time.
var claims = map[string]string{"issue_xlog_fsync": SubWAL, "XLogWrite": SubWAL, "XLogFlush": SubWAL, "XLogBackgroundFlush": SubWAL}

// Classify returns the subsystem of a stack (root first): a claiming
// function anywhere on it wins; else the specific signature nearest the
// leaf; else the generic one nearest the leaf; else SubOther. subs caches
// frameSub per frame.
func Classify(stack []Frame, subs map[Frame]frameClass) string {
	generic := ""
	specific := ""
	for i := len(stack) - 1; i >= 0; i-- {
		f := stack[i]
		if !f.Kernel {
			if c, ok := claims[f.Func]; ok {
				return c
			}
		}
		fc, ok := subs[f]
		if !ok {
			fc.sub, fc.specific = frameSub(f)
			if subs != nil {
				subs[f] = fc
			}
		}
		switch {
		case fc.sub == "":
		case fc.specific && specific == "":
			specific = fc.sub
		case !fc.specific && generic == "":
			generic = fc.sub
		}
	}
	switch {
	case specific != "":
		return specific
	case generic != "":
		return generic
	}
	return SubOther
}

// frameClass caches the signature lookup of one frame.
type frameClass struct {
	sub      string
	specific bool
}
