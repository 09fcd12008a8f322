package tables

import (
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// tableDDL is one table of pgbench's schema as initCreateTables declares it
// (pgbench.c, struct ddlinfo): columns when aid fits in int, columns when it
// needs bigint, and whether the table takes the fill factor. The "filler"
// columns exist for TPC-B's 100-bytes-per-row rule; pgbench leaves them
// NULL except in pgbench_accounts (blank-padded empty string).
type tableDDL struct {
	table, smallCols, bigCols string
	fillFactor                bool
}

// schemaDDL is in pgbench's creation order.
var schemaDDL = []tableDDL{
	{History, "tid int,bid int,aid    int,delta int,mtime timestamp,filler char(22)",
		"tid int,bid int,aid bigint,delta int,mtime timestamp,filler char(22)", false},
	{Tellers, "tid int not null,bid int,tbalance int,filler char(84)",
		"tid int not null,bid int,tbalance int,filler char(84)", true},
	{Accounts, "aid    int not null,bid int,abalance int,filler char(84)",
		"aid bigint not null,bid int,abalance int,filler char(84)", true},
	{Branches, "bid int not null,bbalance int,filler char(88)",
		"bid int not null,bbalance int,filler char(88)", true},
}

// dropSQL drops the four tables in one statement, so foreign keys between
// them do not matter (pgbench.c initDropTables); partitions go with
// pgbench_accounts.
const dropSQL = "drop table if exists pgbench_accounts, pgbench_branches, pgbench_history, pgbench_tellers"

// truncateSQL empties the four tables in one statement (initTruncateTables).
const truncateSQL = "truncate table pgbench_accounts, pgbench_branches, pgbench_history, pgbench_tellers"

// createTablesSQL returns pgbench's CREATE TABLE statements for o, the
// partitions of pgbench_accounts last (initCreateTables, createPartitions).
// serverVersion is server_version_num: from PostgreSQL 18 a partitioned
// table cannot be UNLOGGED, and pgbench 18 leaves the word out for the
// parent; older servers accept it and pgbench 15 writes it.
func createTablesSQL(o Options, serverVersion int) []string {
	var out []string
	unlogged := ""
	if o.Unlogged {
		unlogged = " unlogged"
	}
	for _, d := range schemaDDL {
		cols := d.smallCols
		if o.bigAid() {
			cols = d.bigCols
		}
		u := unlogged
		partitioned := o.Partitions > 0 && d.table == Accounts
		if partitioned && serverVersion >= 180000 {
			u = ""
		}
		s := "create" + u + " table " + d.table + "(" + cols + ")"
		if partitioned {
			s += " partition by " + o.PartitionMethod + " (aid)"
		} else if d.fillFactor {
			s += fmt.Sprintf(" with (fillfactor=%d)", o.FillFactor)
		}
		if o.Tablespace != "" {
			s += " tablespace " + pgx.Identifier{o.Tablespace}.Sanitize()
		}
		out = append(out, s)
	}
	for p := 1; p <= o.Partitions; p++ {
		s := fmt.Sprintf("create%s table %s\n  partition of %s\n", unlogged, partitionName(p), Accounts)
		if o.PartitionMethod == PartitionRange {
			lo, hi := rangeBounds(o, p)
			s += "  for values from (" + lo + ") to (" + hi + ")"
		} else {
			s += fmt.Sprintf("  for values with (modulus %d, remainder %d)", o.Partitions, p-1)
		}
		s += fmt.Sprintf(" with (fillfactor=%d)", o.FillFactor)
		out = append(out, s)
	}
	return out
}

// partitionName is the name of partition p (1-based) of pgbench_accounts.
func partitionName(p int) string { return Accounts + "_" + strconv.Itoa(p) }

// partSize is the number of aids per range partition, rounded up
// (createPartitions).
func partSize(o Options) int64 {
	return (o.accounts() + int64(o.Partitions) - 1) / int64(o.Partitions)
}

// rangeBounds returns the FROM and TO bounds of range partition p as
// pgbench writes them: open-ended first and last partitions (minvalue,
// maxvalue), part_size-wide ones in between.
func rangeBounds(o Options, p int) (from, to string) {
	size := partSize(o)
	from, to = "minvalue", "maxvalue"
	if p > 1 {
		from = strconv.FormatInt(int64(p-1)*size+1, 10)
	}
	if p < o.Partitions {
		to = strconv.FormatInt(int64(p)*size+1, 10)
	}
	return from, to
}

// rangeAids returns the aids of 1..accounts that fall in range partition
// p, inclusive; lo > hi when none do (more partitions than accounts).
func rangeAids(o Options, p int) (lo, hi int64) {
	size := partSize(o)
	lo = int64(p-1)*size + 1
	hi = min(int64(p)*size, o.accounts())
	return lo, hi
}

// primaryKeySQL is initCreatePKeys' statement for a table (or a partition
// of pgbench_accounts), its index in indexTablespace when not "".
func primaryKeySQL(table, indexTablespace string) string {
	col := "aid"
	switch table {
	case Branches:
		col = "bid"
	case Tellers:
		col = "tid"
	}
	s := "alter table " + table + " add primary key (" + col + ")"
	if indexTablespace != "" {
		s += " using index tablespace " + pgx.Identifier{indexTablespace}.Sanitize()
	}
	return s
}

// foreignKeySQL are initCreateFKeys' statements, in its order.
var foreignKeySQL = []string{
	"alter table pgbench_tellers add constraint pgbench_tellers_bid_fkey foreign key (bid) references pgbench_branches",
	"alter table pgbench_accounts add constraint pgbench_accounts_bid_fkey foreign key (bid) references pgbench_branches",
	"alter table pgbench_history add constraint pgbench_history_bid_fkey foreign key (bid) references pgbench_branches",
	"alter table pgbench_history add constraint pgbench_history_tid_fkey foreign key (tid) references pgbench_tellers",
	"alter table pgbench_history add constraint pgbench_history_aid_fkey foreign key (aid) references pgbench_accounts",
}
