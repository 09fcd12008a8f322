package pgbench

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/erplab/erplab/internal/workload/pgbench/script"
)

// ConnectMessage words a failed connection like libpq (and so pgbench):
//
//	connection to server on socket "/tmp/.s.PGSQL.5432" failed: FATAL:  database "x" does not exist
//	connection to server at "db1", port 5432 failed: ...
//
// Errors that are not a *pgconn.ConnectError are returned as they are.
func ConnectMessage(err error) string {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return err.Error()
	}
	where := fmt.Sprintf("connection to server at %q, port %d failed: ", ce.Config.Host, ce.Config.Port)
	if strings.HasPrefix(ce.Config.Host, "/") {
		where = fmt.Sprintf("connection to server on socket \"%s/.s.PGSQL.%d\" failed: ", ce.Config.Host, ce.Config.Port)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return where + script.LibpqMessage(pgErr)
	}
	cause := errors.Unwrap(ce)
	for {
		// perDialConnectError says "addr (host): cause": keep the cause
		next := errors.Unwrap(cause)
		if next == nil || !strings.Contains(cause.Error(), "): ") {
			break
		}
		cause = next
	}
	return where + cause.Error()
}
