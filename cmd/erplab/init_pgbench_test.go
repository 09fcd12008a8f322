package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/erplab/erplab/internal/pgbench/tables"
	"github.com/erplab/erplab/internal/versus/pgbenchinit"
)

// erplab init --workload pgbench into a --dsn database: pgbench's tables
// at the scale and partitioning asked, refused next to a foreign table
// unless --force, and --drop removes pgbench's tables only.
func TestInitPgbenchDSN(t *testing.T) {
	ctx := context.Background()
	dsn := srv.NewDatabase(t)
	out, err := erplab(t, t.TempDir(), "init", "--workload", "pgbench", "--dsn", dsn, "-s", "2",
		"--partitions", "3", "--partition-method", "hash", "--fillfactor", "90").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"creating 3 partitions...", "done in ", "pgbench tables ready: scale 2 (3 hash partitions), 200022 rows"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("no %q in:\n%s", want, out)
		}
	}
	pool := srv.Pool(t, dsn)
	l, ok, err := tables.InstalledLayout(ctx, pool)
	if err != nil || !ok || l != (tables.Layout{Scale: 2, Partitions: 3, PartitionMethod: "hash"}) {
		t.Fatalf("InstalledLayout = %+v, %t, %v", l, ok, err)
	}
	var accounts int
	var opts string
	pool.QueryRow(ctx, `select count(*), (select array_to_string(reloptions, ',') from pg_class where relname = 'pgbench_accounts_1') from pgbench_accounts`).Scan(&accounts, &opts)
	if accounts != 200_000 || opts != "fillfactor=90" {
		t.Fatalf("accounts %d, reloptions %q", accounts, opts)
	}

	if _, err := pool.Exec(ctx, `create table mine (id int)`); err != nil {
		t.Fatal(err)
	}
	cmd := erplab(t, t.TempDir(), "init", "--workload", "pgbench", "--dsn", dsn, "-s", "1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(stderr.String(), "public.mine") || !strings.Contains(stderr.String(), "--force") ||
		strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
		t.Fatalf("init next to a foreign table: %v, stderr %q", err, stderr.String())
	}
	if out, err := erplab(t, t.TempDir(), "init", "--workload", "pgbench", "--dsn", dsn, "-s", "1", "--force").CombinedOutput(); err != nil {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	if scale, parts, ok, err := tables.Installed(ctx, pool); err != nil || !ok || scale != 1 || parts != 0 {
		t.Fatalf("after re-init: Installed = %d, %d, %t, %v", scale, parts, ok, err)
	}

	out, err = erplab(t, t.TempDir(), "init", "--workload", "pgbench", "--dsn", dsn, "--drop").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dropped the pgbench tables (scale 1)") {
		t.Fatalf("--drop: %v\n%s", err, out)
	}
	var pgbenchRels, mine int
	pool.QueryRow(ctx, `select count(*) filter (where relname like 'pgbench%'), count(*) filter (where relname = 'mine') from pg_class`).Scan(&pgbenchRels, &mine)
	if pgbenchRels != 0 || mine != 1 {
		t.Fatalf("after --drop: %d pgbench relations, mine=%d", pgbenchRels, mine)
	}
}

// --vs-pgbench on the throwaway server times pgbench -i with the same
// options after erplab's load and prints both with the ratio.
func TestInitPgbenchVsPgbench(t *testing.T) {
	if _, err := pgbenchinit.FindPgbench(srv.BinDir(t)); err != nil {
		t.Skipf("no pgbench: %v", err)
	}
	out, err := erplab(t, t.TempDir(), "init", "--workload", "pgbench", "-s", "1", "--partitions", "2", "--vs-pgbench").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"erplab init --workload pgbench", "pgbench -i -q -s 1 --partitions 2 --partition-method range",
		"time, erplab / pgbench -i: "} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("no %q in:\n%s", want, out)
		}
	}
	if m := dataDirRE.FindSubmatch(out); m != nil {
		if _, err := os.Stat(string(m[1])); !os.IsNotExist(err) {
			t.Fatalf("throwaway cluster %s left behind", m[1])
		}
	}
}

// Bad pgbench options are one-line usage errors, before any server starts.
func TestInitPgbenchUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-s", "0", "--keep"}, "whole number in 1..2147483647, got 0"},
		{[]string{"-s", "1.5", "--keep"}, "got 1.5"},
		{[]string{"--partitions", "-1", "--keep"}, "partitions must be in range 0.."},
		{[]string{"--partition-method", "hash", "--keep"}, "requires partitions > 0"},
		{[]string{"--partitions", "2", "--partition-method", "list", "--keep"}, `expecting "range" or "hash"`},
		{[]string{"--fillfactor", "5", "--keep"}, "fillfactor must be in range 10..100"},
		{[]string{"--init-steps", "dtx", "--keep"}, "unrecognized initialization step"},
		{[]string{"--seed", "2", "--keep"}, "--seed applies to --workload erp only"},
		{[]string{"--dsn", "dbname=x", "--keep"}, "--keep and --os-user apply to the throwaway server only"},
		{[]string{}, "pass --dsn, --keep or --vs-pgbench"},
	} {
		cmd := erplab(t, t.TempDir(), append([]string{"init", "--workload", "pgbench"}, c.args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(stderr.String(), c.want) ||
			strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
			t.Errorf("%v: exit %v, stderr %q, want one line with %q", c.args, err, stderr.String(), c.want)
		}
	}
	// pgbench's flags are refused with the ERP workload.
	cmd := erplab(t, t.TempDir(), "init", "--partitions", "2", "--keep")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.Contains(stderr.String(), "--partitions applies to --workload pgbench only") {
		t.Errorf("erp with --partitions: exit %v, stderr %q", err, stderr.String())
	}
}
