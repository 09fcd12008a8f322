package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/erplab/erplab/internal/results"
)

// Operation is one key operation of a load test: a unit of user work whose
// response time is scored with APDEX against its target time T.
type Operation struct {
	// Name identifies the operation in results, e.g. "post_sales_invoice".
	Name string
	// Target is the APDEX target time T: a response time up to T satisfies
	// the user, up to 4T is tolerated, above 4T frustrates.
	Target time.Duration
	// Priority ranks the operation for the integral APDEX: 1 is the most
	// important; larger numbers weigh less (see package apdex).
	Priority int
	// Description says in one line what the operation does, for reports.
	Description string
}

// Role is a kind of virtual user: a share of the VUs and the weighted mix of
// key operations such a user performs.
type Role struct {
	// Name of the role, e.g. "sales_manager".
	Name string
	// Share is the relative share of virtual users that take this role
	// (weights, not necessarily summing to 1).
	Share float64
	// Mix maps operation name to its relative weight in this role's choice
	// of the next operation.
	Mix map[string]float64
}

// VU is the state of one virtual user handed to Execute.
type VU struct {
	// ID numbers virtual users from 1 in the order they started.
	ID int
	// Role is the name of the VU's role.
	Role string
	// Rand is the VU's own deterministic random source (seeded from the run
	// seed and the VU id); not safe for use by other goroutines.
	Rand *rand.Rand
	// State is free for the workload to keep per-VU session state in
	// (e.g. the user a VU logs in as, cached temp-table names).
	State any
	// Scheduled is, in the open model, the scheduled start of the
	// arrival the current Execute serves (zero in the closed model), e.g.
	// for pgbench's per-transaction log and its schedule lag.
	Scheduled time.Time
}

// SetupOptions are the parameters of [Workload.Setup].
type SetupOptions struct {
	// Scale is the data scale factor (1 = the workload's nominal size).
	Scale float64
	// Seed makes generated data deterministic.
	Seed uint64
	// Force allows writing into a database that holds tables erplab did not
	// create.
	Force bool
	// Progress, when not nil, receives human-readable progress lines.
	Progress func(format string, args ...any)
}

// Workload is what `erplab run --workload NAME` drives.
type Workload interface {
	// Name is the registry name, e.g. "smoke".
	Name() string
	// Setup creates (or verifies) the schema and data the operations need.
	// It is idempotent: a database already set up at the same scale is left
	// as it is. It returns an error wrapping ErrForeignDatabase when the
	// database holds tables erplab did not create and opts.Force is false.
	Setup(ctx context.Context, pool *pgxpool.Pool, opts SetupOptions) error
	// Operations lists the key operations, each name unique.
	Operations() []Operation
	// Roles lists the roles of virtual users; every Mix key names an
	// operation of Operations.
	Roles() []Role
	// Execute performs one execution of operation op (an index into
	// Operations) on conn for virtual user vu. An error fails the
	// operation; the engine records its SQLSTATE. An error wrapping
	// ErrStopVU also stops vu for the rest of the run. Execute must leave
	// conn outside any transaction when it returns, also on error.
	Execute(ctx context.Context, conn *pgx.Conn, vu *VU, op int) error
}

// Describer is implemented by workloads that can say what a run actually
// ran on after Setup (e.g. the installed data set's scale and seed, which
// may differ from the ones asked for, and their own options); the engine
// records it in the results' parameters as "workload_details".
type Describer interface {
	Describe() map[string]any
}

// Reporter is implemented by workloads that add their own lines after
// the end-of-run summary (e.g. pgbench's familiar report for pgbench
// scripts); doc is the final results document.
type Reporter interface {
	Report(w io.Writer, doc *results.Document)
}

// ErrForeignDatabase is wrapped by Setup errors when the target database
// holds objects that erplab did not create and --force was not given.
var ErrForeignDatabase = fmt.Errorf("database holds objects erplab did not create (pass --force to use it anyway)")

// ErrStopVU, wrapped by an error of Workload.Execute (e.g.
// fmt.Errorf("%w: %w", ErrStopVU, err)), fails the operation as usual (the
// engine records the SQLSTATE of the error it wraps, "client" when none)
// and then stops that virtual user for the rest of the run, like pgbench
// aborting a client after an error it cannot go on from (e.g. a failed
// \gset or a script error). The engine does not replace the VU; it counts
// it in engine.Outcome.AbortedVUs and results.Totals.AbortedVUs, and ends
// the run early once every VU has stopped on its own.
var ErrStopVU = errors.New("virtual user stopped for the rest of the run")

// Validate checks a workload's declarations: unique operation names,
// positive targets and priorities, roles whose mixes name known operations
// with positive weights. It returns the first problem found.
func Validate(w Workload) error {
	ops := w.Operations()
	if len(ops) == 0 {
		return fmt.Errorf("workload %s: no operations", w.Name())
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Name == "" {
			return fmt.Errorf("workload %s: operation with empty name", w.Name())
		}
		if seen[op.Name] {
			return fmt.Errorf("workload %s: duplicate operation %q", w.Name(), op.Name)
		}
		seen[op.Name] = true
		if op.Target <= 0 {
			return fmt.Errorf("workload %s: operation %s: target time must be > 0", w.Name(), op.Name)
		}
		if op.Priority < 1 {
			return fmt.Errorf("workload %s: operation %s: priority must be >= 1", w.Name(), op.Name)
		}
	}
	roles := w.Roles()
	if len(roles) == 0 {
		return fmt.Errorf("workload %s: no roles", w.Name())
	}
	for _, r := range roles {
		if r.Share <= 0 {
			return fmt.Errorf("workload %s: role %s: share must be > 0", w.Name(), r.Name)
		}
		total := 0.0
		for name, wt := range r.Mix {
			if !seen[name] {
				return fmt.Errorf("workload %s: role %s: unknown operation %q", w.Name(), r.Name, name)
			}
			if wt < 0 {
				return fmt.Errorf("workload %s: role %s: negative weight for %s", w.Name(), r.Name, name)
			}
			total += wt
		}
		if total <= 0 {
			return fmt.Errorf("workload %s: role %s: mix has no positive weight", w.Name(), r.Name)
		}
	}
	return nil
}

// OverrideMix parses a --mix specification "op=w,op=w,..." and returns a
// single role "mix" with those weights, replacing the workload's roles.
// Unknown operation names and non-positive totals are errors.
func OverrideMix(w Workload, spec string) ([]Role, error) {
	known := map[string]bool{}
	for _, op := range w.Operations() {
		known[op.Name] = true
	}
	mix := map[string]float64{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("--mix %q: want op=weight, got %q", spec, part)
		}
		name = strings.TrimSpace(name)
		if !known[name] {
			return nil, fmt.Errorf("--mix: unknown operation %q (known: %s)", name, strings.Join(sortedKeys(known), ", "))
		}
		var f float64
		if _, err := fmt.Sscanf(strings.TrimSpace(val), "%g", &f); err != nil || f < 0 {
			return nil, fmt.Errorf("--mix: weight of %s must be a number >= 0, got %q", name, val)
		}
		mix[name] = f
	}
	total := 0.0
	for _, v := range mix {
		total += v
	}
	if total <= 0 {
		return nil, fmt.Errorf("--mix %q: no operation has a positive weight", spec)
	}
	return []Role{{Name: "mix", Share: 1, Mix: mix}}, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
