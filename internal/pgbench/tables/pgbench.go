package tables

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/erplab/erplab/internal/conninfo"
)

// RunPgbench runs the real `pgbench -i` with the options equivalent to o
// (Options.PgbenchArgs) into the database of dsn, and returns its wall
// time. pgbench is the path of the binary (pgbenchinit.FindPgbench finds
// one). The password of dsn goes to pgbench through PGPASSWORD, not its
// command line (conninfo.Split). The error carries pgbench's last output line.
func RunPgbench(ctx context.Context, pgbench, dsn string, o Options) (time.Duration, error) {
	args, err := o.PgbenchArgs()
	if err != nil {
		return 0, err
	}
	target, env, err := conninfo.Split(dsn)
	if err != nil {
		return 0, fmt.Errorf("pgbench -i: %w", err)
	}
	cmd := exec.CommandContext(ctx, pgbench, append(args, target)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("pgbench %s: %w: %s", strings.Join(args, " "), err, lastLine(out.String()))
	}
	return time.Since(start), nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
