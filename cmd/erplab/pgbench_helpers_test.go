package main

import (
	"os/exec"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// pgbenchCmd is `erplab pgbench args... -h H -p P -U U DB` in dir for the
// server of dsn (its password file in PGPASSFILE), with extra environment
// variables env ("K=V").
func pgbenchCmd(t *testing.T, dir, dsn string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	args = append(append([]string{"pgbench"}, args...), "-h", cfg.Host, "-p", strconv.Itoa(int(cfg.Port)), "-U", cfg.User, cfg.Database)
	cmd := erplab(t, dir, args...)
	cmd.Env = append(append(cmd.Env, "PGPASSFILE="+passfileOf(dsn)), env...)
	return cmd
}
