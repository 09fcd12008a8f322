package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"github.com/spf13/cobra"

	"github.com/erplab/erplab/internal/conninfo"
	"github.com/erplab/erplab/internal/rewrite"
)

func newRewriteCmd() *cobra.Command {
	var (
		dsn, dsnFile     string
		explain, analyze bool
		params           []string
		disable          []string
		assumeTypes      bool
	)
	cmd := &cobra.Command{
		Use:   "rewrite [file|-]",
		Short: "Rewrite OR-over-subquery filters to = ANY (ARRAY(subquery)) and show the effect",
		Long: `Read SQL (a file, or standard input with - or no argument), apply erplab's rewrite rules
with PostgreSQL's own parser, and print the rewritten SQL, or say it is unchanged and why
(on standard error: each firing or veto at its line and column in the file, 1-based, the
column in characters as psql counts them). Rules: ` + strings.Join(rewrite.Rules(), ", ") + ` (field notes, section 1, cause 3).

With --dsn the rules also consult the server: unqualified names, function volatility, an
index leading with each compared column, and the types of the compared columns and of the
subqueries' outputs (an arm is rewritten only when both are scalar, non-array types, domains
resolved), and what each subquery evaluates (every function the server resolves for it must
be leakproof and not volatile: the rewritten form evaluates it where the original may not;
LIKE is accepted when its pattern cannot end with its escape character: a constant is checked,
a $n pattern makes the rewrite hold only for values that pass, which stderr names and
erplab proxy checks at each execution;
learnt from a temporary view created in a transaction that is rolled back); the rewritten
statement is then prepared (never executed) and must describe like the original. Without --dsn the types are unknown and nothing is rewritten ("types unknown:
not rewritten") unless --assume-types asserts that they are scalar, non-array types. --explain shows both statements' estimated plan
costs side by side; --analyze runs both (in a READ ONLY transaction, rolled back) and shows
actual times. Statements with $n parameters need one --param value per parameter (sent as
untyped literals).`,
		Example: `  erplab rewrite query.sql
  echo "SELECT ... WHERE t.a = 1 OR t.a IN (SELECT u.x FROM u)" | erplab rewrite
  erplab rewrite --assume-types query.sql
  erplab rewrite --dsn 'dbname=erp' --explain --analyze --param 1 query.sql`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src, name, raw, start, err := readSQL(cmd, args)
			if err != nil {
				return err
			}
			if analyze {
				explain = true
			}
			opts := rewrite.Options{Disabled: map[string]bool{}, RequireTypes: !assumeTypes}
			known := map[string]bool{}
			for _, r := range rewrite.Rules() {
				known[r] = true
			}
			for _, d := range disable {
				if !known[d] {
					return withCode(exitUsage, fmt.Errorf("--disable %q: unknown rule (rules: %s)", d, strings.Join(rewrite.Rules(), ", ")))
				}
				opts.Disabled[d] = true
			}
			var conn *pgx.Conn
			d, envGiven, err := resolveDSN(cmd, dsn, dsnFile)
			if err != nil {
				return err
			}
			if d != "" || (explain && envGiven) {
				cfg, err := pgx.ParseConfig(d)
				if err != nil {
					return withCode(exitUsage, fmt.Errorf("--dsn: %s", conninfo.Describe(err)))
				}
				conn, err = pgx.ConnectConfig(ctx, cfg)
				if err != nil {
					return errors.New(conninfo.Describe(err))
				}
				defer conn.Close(context.WithoutCancel(ctx))
				cat := rewrite.NewPGCatalogConn(conn)
				opts.Catalog, opts.Types = cat, cat
			} else if explain {
				return withCode(exitUsage, errors.New("--explain needs a server: pass --dsn (or set PG* variables)"))
			}
			res, err := rewrite.Rewrite(ctx, src, opts)
			if err != nil {
				// What rewrite refuses is the input given: a usage error.
				return withCode(exitUsage, placeSQLError(name, raw, start, err))
			}
			if explain {
				if err := checkExplain(src, params, analyze); err != nil {
					return err
				}
			} else if len(params) > 0 {
				return withCode(exitUsage, errors.New("--param is for --explain: without it the statement is not run"))
			}
			res.Relocate(raw, start) // lines and columns of the file, not of its trimmed text
			out := cmd.OutOrStdout()
			fmt.Fprintln(cmd.ErrOrStderr(), "-- "+res.Explain())
			fmt.Fprintln(out, res.SQL)
			if !explain {
				return nil
			}
			return explainBoth(ctx, out, conn, src, res.SQL, params, analyze)
		},
	}
	cmd.Flags().StringVar(&dsn, "dsn", "", "server whose catalog the rules consult and where --explain runs (libpq key=value or URL)")
	addDSNFileFlag(cmd.Flags(), &dsnFile, "dsn")
	cmd.Flags().BoolVar(&explain, "explain", false, "show both statements' estimated costs (needs --dsn; one statement)")
	cmd.Flags().BoolVar(&analyze, "analyze", false, "also run both and show actual times (read-only statements only)")
	cmd.Flags().StringArrayVar(&params, "param", nil, "value of $1, $2, ... for --explain (repeat in order)")
	cmd.Flags().StringSliceVar(&disable, "disable", nil, "rules to switch off (comma-separated)")
	cmd.Flags().BoolVar(&assumeTypes, "assume-types", false, "without --dsn: assert that the compared columns and the subqueries' outputs are scalar, non-array types of one = operator and that the subqueries cannot fail or have side effects, and rewrite on the text alone")
	return cmd
}

// placeSQLError prefixes err, rewrite's refusal of the statement at byte
// start of raw read from name, with name:line:column where it knows the
// offset (a *rewrite.SyntaxError; a *rewrite.LimitError's line only).
func placeSQLError(name, raw string, start int, err error) error {
	if le := (*rewrite.LimitError)(nil); errors.As(err, &le) {
		line, _ := rewrite.LineColumn(raw, start+le.Offset)
		return fmt.Errorf("%s:%d: %w", name, line, le)
	}
	if se := (*rewrite.SyntaxError)(nil); errors.As(err, &se) {
		if se.Offset < 0 {
			return fmt.Errorf("%s: %w", name, se)
		}
		line, col := rewrite.LineColumn(raw, start+se.Offset)
		return fmt.Errorf("%s:%d:%d: %w", name, line, col, se)
	}
	return err
}

// readSQL returns the SQL of the file or standard input args name,
// trimmed of surrounding white space; name is the file name ("stdin" for
// standard input), raw the whole text read and start the byte offset of
// sql in raw.
func readSQL(cmd *cobra.Command, args []string) (sql, name, raw string, start int, err error) {
	var b []byte
	if len(args) == 0 || args[0] == "-" {
		name = "stdin"
		b, err = io.ReadAll(cmd.InOrStdin())
	} else {
		name = args[0]
		b, err = os.ReadFile(args[0])
	}
	if err != nil {
		return "", "", "", 0, fmt.Errorf("read SQL: %w", err)
	}
	raw = string(b)
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", "", "", 0, withCode(exitUsage, errors.New("no SQL given"))
	}
	return s, name, raw, strings.Index(raw, s), nil
}

// checkExplain refuses, before anything is printed or run, what --explain
// and --analyze cannot do: more than one statement, a --param count other
// than the statement's parameters ($1..$n), and --analyze of a statement
// that writes (it runs in a read-only transaction, rolled back).
func checkExplain(sql string, params []string, analyze bool) error {
	tree, err := rewrite.Parse(sql)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("parse: %w", err))
	}
	if len(tree.Stmts) != 1 {
		return withCode(exitUsage, fmt.Errorf("--explain takes one statement, got %d: put the one to compare in a file of its own", len(tree.Stmts)))
	}
	if analyze {
		if why := notPlainSelect(tree.Stmts[0].Stmt); why != "" {
			return withCode(exitUsage, fmt.Errorf("--analyze runs both statements in a read-only transaction (rolled back), and %s: use --explain without --analyze", why))
		}
	}
	n, err := rewrite.MaxParam(sql)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("scan: %w", err))
	}
	if n != len(params) {
		if n == 0 {
			return withCode(exitUsage, fmt.Errorf("--param given %d time(s), but the statement has no $n parameters", len(params)))
		}
		ps := "parameter $1"
		if n > 1 {
			ps = fmt.Sprintf("parameters $1..$%d", n)
		}
		return withCode(exitUsage, fmt.Errorf("the statement has %s: give --param once for each, in order (got %d)", ps, len(params)))
	}
	return nil
}

// notPlainSelect says why --analyze must not run the statement n (it
// writes, creates or locks), or "" for a plain SELECT.
func notPlainSelect(n *pg_query.Node) string {
	switch n.GetNode().(type) {
	case *pg_query.Node_InsertStmt:
		return "INSERT writes"
	case *pg_query.Node_UpdateStmt:
		return "UPDATE writes"
	case *pg_query.Node_DeleteStmt:
		return "DELETE writes"
	case *pg_query.Node_MergeStmt:
		return "MERGE writes"
	case *pg_query.Node_SelectStmt:
	default:
		return "the statement is not a SELECT"
	}
	sel := n.GetSelectStmt()
	if sel.IntoClause != nil {
		return "SELECT INTO creates a table"
	}
	if len(sel.LockingClause) > 0 {
		return "FOR UPDATE/SHARE locks rows"
	}
	if w := sel.WithClause; w != nil {
		for _, c := range w.Ctes {
			switch c.GetCommonTableExpr().GetCtequery().GetNode().(type) {
			case *pg_query.Node_InsertStmt, *pg_query.Node_UpdateStmt, *pg_query.Node_DeleteStmt, *pg_query.Node_MergeStmt:
				return "a WITH query writes"
			}
		}
	}
	return ""
}

// planSummary is what explainBoth prints for one statement.
type planSummary struct {
	cost           float64
	planMS, execMS float64
	scans          []string
}

func explainBoth(ctx context.Context, out io.Writer, conn *pgx.Conn, orig, rewritten string, params []string, analyze bool) error {
	tree, err := rewrite.Parse(orig)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("parse: %w", err))
	}
	if len(tree.Stmts) != 1 {
		return withCode(exitUsage, fmt.Errorf("--explain takes one statement, got %d", len(tree.Stmts)))
	}
	args := make([]any, 0, len(params)+1)
	args = append(args, pgx.QueryExecModeSimpleProtocol)
	for _, p := range params {
		args = append(args, p)
	}
	var sums [2]planSummary
	for i, q := range []string{orig, rewritten} {
		s, err := explainOne(ctx, conn, q, args, analyze)
		if err != nil {
			return err
		}
		sums[i] = s
	}
	fmt.Fprintf(out, "\n%-22s %16s %16s\n", "", "original", "rewritten")
	fmt.Fprintf(out, "%-22s %16.2f %16.2f\n", "estimated total cost", sums[0].cost, sums[1].cost)
	if analyze {
		fmt.Fprintf(out, "%-22s %16.3f %16.3f\n", "planning, ms", sums[0].planMS, sums[1].planMS)
		fmt.Fprintf(out, "%-22s %16.3f %16.3f\n", "execution, ms", sums[0].execMS, sums[1].execMS)
		if sums[1].execMS > 0 {
			fmt.Fprintf(out, "%-22s %16s %15.1fx\n", "speed-up", "", (sums[0].execMS+sums[0].planMS)/(sums[1].execMS+sums[1].planMS))
		}
	}
	fmt.Fprintf(out, "original scans:  %s\nrewritten scans: %s\n", strings.Join(sums[0].scans, ", "), strings.Join(sums[1].scans, ", "))
	return nil
}

func explainOne(ctx context.Context, conn *pgx.Conn, q string, args []any, analyze bool) (planSummary, error) {
	var s planSummary
	opts := "FORMAT JSON"
	if analyze {
		opts = "ANALYZE, FORMAT JSON"
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return s, fmt.Errorf("explain: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN ("+opts+") "+q, args...).Scan(&raw); err != nil {
		return s, fmt.Errorf("explain: %s", strings.Join(strings.Fields(err.Error()), " "))
	}
	var doc []struct {
		Plan          map[string]any `json:"Plan"`
		PlanningTime  float64        `json:"Planning Time"`
		ExecutionTime float64        `json:"Execution Time"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc) == 0 {
		return s, fmt.Errorf("explain: unexpected output: %v", err)
	}
	s.cost, _ = doc[0].Plan["Total Cost"].(float64)
	s.planMS, s.execMS = doc[0].PlanningTime, doc[0].ExecutionTime
	var visit func(p map[string]any)
	visit = func(p map[string]any) {
		if nt, _ := p["Node Type"].(string); strings.Contains(nt, "Scan") && !strings.Contains(nt, "Subquery") {
			rel, _ := p["Relation Name"].(string)
			if rel == "" {
				rel, _ = p["Index Name"].(string)
			}
			s.scans = append(s.scans, nt+" "+rel)
		}
		if kids, ok := p["Plans"].([]any); ok {
			for _, k := range kids {
				if m, ok := k.(map[string]any); ok {
					visit(m)
				}
			}
		}
	}
	visit(doc[0].Plan)
	return s, nil
}
