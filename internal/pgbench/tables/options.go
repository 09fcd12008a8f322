// Package tables builds pgbench's four tables the way `pgbench -i` of
// PostgreSQL 15 does (src/bin/pgbench/pgbench.c: initDropTables,
// initCreateTables, createPartitions, initGenerateDataClientSide,
// initGenerateDataServerSide, initVacuum, initCreatePKeys, initCreateFKeys,
// runInitSteps), only faster: the data goes in with binary COPY over several
// connections at once, and VACUUM and the primary keys of the partitions are
// built in parallel.
//
// The result is the same as pgbench's: the same tables, column types, fill
// factors, partition bounds, rows and primary/foreign keys, so pgbench (or
// erplab's own pgbench runner) can run its scripts on them unchanged:
//
//	pgbench_branches  bid 1..s, bbalance 0, filler NULL             (fillfactor F)
//	pgbench_tellers   tid 1..10s, bid (tid-1)/10+1, tbalance 0, filler NULL
//	pgbench_accounts  aid 1..100000s, bid (aid-1)/100000+1, abalance 0,
//	                  filler 84 blanks; range or hash partitioned on aid
//	pgbench_history   empty
//
// Installed reads an existing set back (pgbench's GetTableInfo: count(*) of
// pgbench_branches is the scale), and Vacuum is what pgbench runs before a
// benchmark unless -n ("starting vacuum...end.").
//
// What differs from pgbench -i, by design: pgbench 15 INSERTs branches and
// tellers one row at a time, Init COPYs them (FREEZE); without step v the
// visibility map differs (pgbench's unpartitioned accounts are all-visible
// after its COPY FREEZE, an ordinary pgbench_accounts loaded on 4 or more
// connections is not); object OIDs and the order in which partition
// indexes are built differ; progress lines follow pgbench's wording, not
// byte for byte. The tests compare everything else with a real pgbench -i.
package tables

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Table names, as pgbench creates them (unqualified: they land in the first
// schema of search_path, like pgbench's).
const (
	Accounts = "pgbench_accounts"
	Branches = "pgbench_branches"
	Tellers  = "pgbench_tellers"
	History  = "pgbench_history"
)

// Row counts per scale unit (pgbench.c: nbranches, ntellers, naccounts).
const (
	BranchesPerScale = 1
	TellersPerScale  = 10
	AccountsPerScale = 100_000
)

// Scale32BitThreshold is the scale from which pgbench declares aid (in
// pgbench_accounts and pgbench_history) bigint instead of int
// (pgbench.c SCALE_32BIT_THRESHOLD).
const Scale32BitThreshold = 20000

// MaxScale is the largest scale pgbench accepts (-s is an int).
const MaxScale = math.MaxInt32

// Initialisation steps (pgbench -I): d drop tables, t create tables,
// g generate data client-side, G generate data server-side, v vacuum,
// p primary keys, f foreign keys. Spaces are ignored.
const (
	DefaultSteps = "dtgvp"
	AllSteps     = "dtgGvpf"
)

// Partition methods of Options.PartitionMethod (pgbench --partition-method).
const (
	PartitionRange = "range"
	PartitionHash  = "hash"
)

// Options are the parameters of Init, named after pgbench -i's options.
type Options struct {
	// Scale is pgbench -s: 1..MaxScale.
	Scale int
	// Partitions is pgbench --partitions: the number of partitions of
	// pgbench_accounts, 0 (the default) for an ordinary table.
	Partitions int
	// PartitionMethod is pgbench --partition-method, "range" or "hash"
	// (case-insensitive); "" means range when Partitions > 0. Giving it
	// without Partitions is an error, as in pgbench.
	PartitionMethod string
	// FillFactor is pgbench -F (fill factor of branches, tellers, accounts
	// and its partitions, percent): 10..100; 0 means 100.
	FillFactor int
	// Unlogged is pgbench --unlogged-tables.
	Unlogged bool
	// ForeignKeys is pgbench --foreign-keys: appends step f to Steps when
	// it is not there.
	ForeignKeys bool
	// Tablespace is pgbench --tablespace: the tables are created in it
	// (partitions follow their parent); "" = the database's default.
	Tablespace string
	// IndexTablespace is pgbench --index-tablespace: the primary keys'
	// indexes are built in it.
	IndexTablespace string
	// NoVacuum is pgbench -n in -i mode: removes step v from Steps.
	NoVacuum bool
	// Steps is pgbench -I, characters of AllSteps (and spaces); "" means
	// DefaultSteps.
	Steps string
	// Parallel is the number of connections used at once for COPY, VACUUM
	// and primary keys; 0 means GOMAXPROCS. It is capped at the pool's
	// MaxConns.
	Parallel int
	// Force lets Init run in a database holding tables that are neither
	// pgbench's nor erplab's (they are left untouched).
	Force bool
	// Progress, when not nil, receives pgbench-like progress lines
	// ("creating tables...", "%d of %d tuples (%d%%) done ...", "done in").
	Progress func(format string, args ...any)
}

// normalized returns o with defaults applied and the steps expanded, or an
// error saying which option is wrong (pgbench's own checks, main() and
// checkInitSteps in pgbench.c).
func (o Options) normalized() (Options, error) {
	if o.Scale < 1 {
		return o, fmt.Errorf("pgbench init: scale must be in range 1..%d, got %d", MaxScale, o.Scale)
	}
	if o.Partitions < 0 {
		return o, fmt.Errorf("pgbench init: partitions must be in range 0..%d, got %d", math.MaxInt32, o.Partitions)
	}
	switch m := strings.ToLower(o.PartitionMethod); m {
	case "":
		if o.Partitions > 0 {
			o.PartitionMethod = PartitionRange
		}
	case PartitionRange, PartitionHash:
		if o.Partitions == 0 {
			return o, errors.New("pgbench init: partition method " + strconv.Quote(m) + " requires partitions > 0")
		}
		o.PartitionMethod = m
	default:
		return o, fmt.Errorf("pgbench init: invalid partition method, expecting \"range\" or \"hash\", got: %q", o.PartitionMethod)
	}
	if o.FillFactor == 0 {
		o.FillFactor = 100
	}
	if o.FillFactor < 10 || o.FillFactor > 100 {
		return o, fmt.Errorf("pgbench init: fillfactor must be in range 10..100, got %d", o.FillFactor)
	}
	if o.Parallel < 0 {
		return o, fmt.Errorf("pgbench init: parallel must be >= 0, got %d", o.Parallel)
	}
	if o.Steps == "" {
		o.Steps = DefaultSteps
	}
	for _, c := range o.Steps {
		if !strings.ContainsRune(AllSteps+" ", c) {
			return o, fmt.Errorf("pgbench init: unrecognized initialization step %q (allowed step characters are %q)", c, AllSteps)
		}
	}
	if o.NoVacuum {
		o.Steps = strings.ReplaceAll(o.Steps, "v", " ")
	}
	if o.ForeignKeys && !strings.Contains(o.Steps, "f") {
		o.Steps += "f"
	}
	if strings.TrimSpace(o.Steps) == "" {
		return o, errors.New("pgbench init: no initialization steps specified")
	}
	return o, nil
}

// Validate reports whether Init would accept o, with the same one-line
// error Init would return.
func (o Options) Validate() error {
	_, err := o.normalized()
	return err
}

// PgbenchArgs returns the arguments of the `pgbench -i` run that builds the
// same tables as Init(o), database name excluded, e.g.
// ["-i", "-s", "10", "--partitions", "4", "--partition-method", "hash"].
// Progress goes to pgbench's quiet mode (-q). Parallel and Force have no
// pgbench counterpart. The error is Validate's.
func (o Options) PgbenchArgs() ([]string, error) {
	n, err := o.normalized()
	if err != nil {
		return nil, err
	}
	args := []string{"-i", "-q", "-s", strconv.Itoa(n.Scale)}
	if n.Partitions > 0 {
		args = append(args, "--partitions", strconv.Itoa(n.Partitions), "--partition-method", n.PartitionMethod)
	}
	if n.FillFactor != 100 {
		args = append(args, "--fillfactor", strconv.Itoa(n.FillFactor))
	}
	if n.Unlogged {
		args = append(args, "--unlogged-tables")
	}
	// The expanded steps carry -n and --foreign-keys.
	if n.Steps != DefaultSteps {
		args = append(args, "--init-steps", n.Steps)
	}
	return args, nil
}

// accounts is the number of pgbench_accounts rows.
func (o Options) accounts() int64 { return int64(o.Scale) * AccountsPerScale }

// bigAid tells whether aid columns are bigint (pgbench.c initCreateTables).
func (o Options) bigAid() bool { return o.Scale >= Scale32BitThreshold }

// stepName is pgbench's name of an initialisation step in its
// "done in ..." line (runInitSteps).
func stepName(c byte) string {
	switch c {
	case 'd':
		return "drop tables"
	case 't':
		return "create tables"
	case 'g':
		return "client-side generate"
	case 'G':
		return "server-side generate"
	case 'v':
		return "vacuum"
	case 'p':
		return "primary keys"
	case 'f':
		return "foreign keys"
	}
	return ""
}
