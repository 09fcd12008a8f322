package tables

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// RunPgbench runs the real `pgbench -i` with the options equivalent to o
// (Options.PgbenchArgs) into the database of dsn, and returns its wall
// time. pgbench is the path of the binary (pgbenchinit.FindPgbench finds
// one). The password of dsn goes to pgbench through PGPASSWORD, not its
// command line. The error carries pgbench's last output line.
func RunPgbench(ctx context.Context, pgbench, dsn string, o Options) (time.Duration, error) {
	args, err := o.PgbenchArgs()
	if err != nil {
		return 0, err
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return 0, fmt.Errorf("pgbench -i: %w", err)
	}
	target := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", quoteValue(cfg.Host), cfg.Port, quoteValue(cfg.User), quoteValue(cfg.Database))
	cmd := exec.CommandContext(ctx, pgbench, append(args, target)...)
	cmd.Env = os.Environ()
	if cfg.Password != "" {
		cmd.Env = append(cmd.Env, "PGPASSWORD="+cfg.Password)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("pgbench %s: %w: %s", strings.Join(args, " "), err, lastLine(out.String()))
	}
	return time.Since(start), nil
}

// quoteValue quotes a libpq key=value value (libpq-connect.html,
// "Keyword/Value Connection Strings": single quotes, backslash escapes).
func quoteValue(v string) string {
	if v != "" && !strings.ContainsAny(v, ` '\`) {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
