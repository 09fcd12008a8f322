package erp

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RegisterCheck is the comparison of one totals table with the sums of its
// register's movements.
type RegisterCheck struct {
	// Name says what was compared, e.g. "goods balance by month".
	Name string
	// Movements and Totals are the tables compared.
	Movements, Totals string
	// Compared is the number of (period, dimensions) keys compared: the
	// union of the keys expected from the movements and the keys stored.
	Compared int64
	// Mismatches is the number of keys whose stored totals differ from the
	// movements (a missing row counts as zero resources).
	Mismatches int64
}

// CheckReport is the result of [Check].
type CheckReport struct {
	Registers []RegisterCheck
	// Mismatches is the sum of the registers' mismatches.
	Mismatches int64
	// NegativeBalances counts current-balance rows (period 3999-11-01) of
	// the goods register below zero: not an inconsistency, a fact to report
	// (loaded data has none).
	NegativeBalances int64
}

// OK is true when every totals row equals the sums of movements.
func (r CheckReport) OK() bool { return r.Mismatches == 0 }

// String is a one-line-per-register summary.
func (r CheckReport) String() string {
	var b strings.Builder
	for _, c := range r.Registers {
		fmt.Fprintf(&b, "%s (%s vs %s): %d keys compared, %d mismatched\n", c.Name, c.Totals, c.Movements, c.Compared, c.Mismatches)
	}
	fmt.Fprintf(&b, "negative current balances: %d\n", r.NegativeBalances)
	return b.String()
}

// checkQuery is one comparison: sql returns (compared, mismatched).
type checkQuery struct {
	name, movements, totals, sql string
}

// checkQueries builds the comparison queries. Rules (see schema.sql):
// active records only; the goods balance total at month M (first day) is
// the sum of receipts minus expenses with _period before M + 1 month, for
// every month from the first movement's month to the last stored month;
// the 3999-11-01 row is the sum over all movements; a turnover total at
// month M is the sum of M's movements. Totals are summed over _splitter.
func checkQueries(sep bool) []checkQuery {
	s := ""
	if sep {
		s = SeparatorColumn + " AS sp, "
	}
	// key lists grouping columns, the separator first when present; qual
	// does the same with a table alias.
	key := func(cols ...string) string {
		if sep {
			cols = append([]string{"sp"}, cols...)
		}
		return strings.Join(cols, ", ")
	}
	qual := func(alias string, cols ...string) string {
		if sep {
			cols = append([]string{"sp"}, cols...)
		}
		for i := range cols {
			cols[i] = alias + "." + cols[i]
		}
		return strings.Join(cols, ", ")
	}
	gridSep := ""
	if sep {
		gridSep = "d.sp, "
	}
	const cur = "'3999-11-01 00:00:00'"
	goodsMonthly := `
WITH mv AS (
  SELECT ` + s + `date_trunc('month', _period) AS mon, _fld1235rref AS d1, _fld1236rref AS d2,
         sum(CASE WHEN _recordkind = 0 THEN _fld1237 ELSE -_fld1237 END) AS q
  FROM ` + TableGoodsMovements + ` WHERE _active
  GROUP BY ` + key("mon", "d1", "d2") + `),
tot AS (
  SELECT ` + s + `_period AS mon, _fld1235rref AS d1, _fld1236rref AS d2, sum(_fld1237) AS q
  FROM ` + TableGoodsBalanceTotals + ` WHERE _period < ` + cur + `
  GROUP BY ` + key("mon", "d1", "d2") + `),
months AS (
  SELECT generate_series((SELECT min(mon) FROM mv), (SELECT max(mon) FROM tot), interval '1 month') AS mon),
dims AS (SELECT DISTINCT ` + key("d1", "d2") + ` FROM mv),
cum AS (
  SELECT ` + qual("g", "mon", "d1", "d2") + `,
         sum(coalesce(mv.q, 0)) OVER (PARTITION BY ` + qual("g", "d1", "d2") + ` ORDER BY g.mon) AS q
  FROM (SELECT ` + gridSep + `m.mon, d.d1, d.d2 FROM months m CROSS JOIN dims d) g
  LEFT JOIN mv USING (` + key("mon", "d1", "d2") + `))
SELECT count(*), count(*) FILTER (WHERE coalesce(cum.q, 0) <> coalesce(tot.q, 0))
FROM cum FULL JOIN tot USING (` + key("mon", "d1", "d2") + `)`
	goodsCurrent := `
WITH mv AS (
  SELECT ` + s + `_fld1235rref AS d1, _fld1236rref AS d2,
         sum(CASE WHEN _recordkind = 0 THEN _fld1237 ELSE -_fld1237 END) AS q
  FROM ` + TableGoodsMovements + ` WHERE _active GROUP BY ` + key("d1", "d2") + `),
tot AS (
  SELECT ` + s + `_fld1235rref AS d1, _fld1236rref AS d2, sum(_fld1237) AS q
  FROM ` + TableGoodsBalanceTotals + ` WHERE _period = ` + cur + ` GROUP BY ` + key("d1", "d2") + `)
SELECT count(*), count(*) FILTER (WHERE coalesce(mv.q, 0) <> coalesce(tot.q, 0))
FROM mv FULL JOIN tot USING (` + key("d1", "d2") + `)`
	sales := `
WITH mv AS (
  SELECT ` + s + `date_trunc('month', _period) AS mon, _fld1261rref AS d1, _fld1262rref AS d2, _fld1263rref AS d3,
         sum(_fld1264) AS q, sum(_fld1265) AS a, sum(_fld1266) AS v
  FROM ` + TableSalesMovements + ` WHERE _active GROUP BY ` + key("mon", "d1", "d2", "d3") + `),
tot AS (
  SELECT ` + s + `_period AS mon, _fld1261rref AS d1, _fld1262rref AS d2, _fld1263rref AS d3,
         sum(_fld1264) AS q, sum(_fld1265) AS a, sum(_fld1266) AS v
  FROM ` + TableSalesTurnoverTotals + ` GROUP BY ` + key("mon", "d1", "d2", "d3") + `)
SELECT count(*), count(*) FILTER (WHERE coalesce(mv.q, 0) <> coalesce(tot.q, 0)
                                     OR coalesce(mv.a, 0) <> coalesce(tot.a, 0)
                                     OR coalesce(mv.v, 0) <> coalesce(tot.v, 0))
FROM mv FULL JOIN tot USING (` + key("mon", "d1", "d2", "d3") + `)`
	return []checkQuery{
		{"goods balance by month", TableGoodsMovements, TableGoodsBalanceTotals, goodsMonthly},
		{"goods current balance", TableGoodsMovements, TableGoodsBalanceTotals, goodsCurrent},
		{"sales turnover by month", TableSalesMovements, TableSalesTurnoverTotals, sales},
	}
}

// Check proves that register totals equal the sums of their movements in
// the pool's database: the goods balance totals by month and the current
// balance, and the sales turnover totals by month (rules in checkQueries).
// It reads the marker for the separator setting and fails if there is
// none. Each comparison is one SQL statement (a full scan of the register
// and its totals), all in one read-only REPEATABLE READ transaction (one
// snapshot); about 13 s at scale 1 on 2 cores.
func Check(ctx context.Context, pool *pgxpool.Pool) (CheckReport, error) {
	m, ok, err := Installed(ctx, pool)
	if err != nil {
		return CheckReport{}, err
	}
	if !ok {
		return CheckReport{}, fmt.Errorf("erp: check: no erplab ERP data set in this database (%s not found)", TableMeta)
	}
	// One snapshot for all comparisons, so that postings committed while
	// Check runs cannot make movements and totals look inconsistent.
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return CheckReport{}, fmt.Errorf("erp: check: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only
	var rep CheckReport
	for _, q := range checkQueries(m.Separator) {
		c := RegisterCheck{Name: q.name, Movements: q.movements, Totals: q.totals}
		if err := tx.QueryRow(ctx, q.sql).Scan(&c.Compared, &c.Mismatches); err != nil {
			return rep, fmt.Errorf("erp: check %s: %w", q.name, err)
		}
		rep.Registers = append(rep.Registers, c)
		rep.Mismatches += c.Mismatches
	}
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+TableGoodsBalanceTotals+
		" WHERE _period = '3999-11-01' AND _fld1237 < 0").Scan(&rep.NegativeBalances); err != nil {
		return rep, fmt.Errorf("erp: check negative balances: %w", err)
	}
	return rep, nil
}
