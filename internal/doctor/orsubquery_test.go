package doctor

import (
	"reflect"
	"testing"
)

func TestFindORSubqueries(t *testing.T) {
	cases := []struct {
		name, sql string
		want      []ORSubquery
	}{
		{"constant or IN subquery", `SELECT * FROM doc d WHERE d.owner = $1 OR d.owner IN (SELECT o.id FROM owner o WHERE o.region = $2)`,
			[]ORSubquery{{Column: "d.owner", Arms: 2, SubqueryArms: 1}}},
		{"two subqueries, reversed operands", `SELECT 1 FROM t WHERE $1 = t.a OR t.a = ANY (SELECT x FROM u) OR t.a = (SELECT max(y) FROM v)`,
			[]ORSubquery{{Column: "t.a", Arms: 3, SubqueryArms: 2}}},
		{"nested ORs flatten", `SELECT 1 FROM t WHERE (a = 1 OR (a IN (1, 2) OR a IN (SELECT b FROM u)))`,
			[]ORSubquery{{Column: "a", Arms: 3, SubqueryArms: 1}}},
		{"inside a join condition and a CTE", `WITH c AS (SELECT * FROM t JOIN u ON u.k = t.k AND (t.ref = $1 OR t.ref IN (SELECT r FROM w))) SELECT * FROM c`,
			[]ORSubquery{{Column: "t.ref", Arms: 2, SubqueryArms: 1}}},
		{"type cast column", `SELECT 1 FROM t WHERE t.a::text = $1 OR t.a::text IN (SELECT s FROM u)`,
			[]ORSubquery{{Column: "t.a", Arms: 2, SubqueryArms: 1}}},
		{"constants only: the planner uses = ANY", `SELECT 1 FROM t WHERE a = $1 OR a = $2 OR a IN ($3, $4)`, nil},
		{"different columns", `SELECT 1 FROM t WHERE a = $1 OR b IN (SELECT c FROM u)`,
			[]ORSubquery{{Column: "a, b", Arms: 2, SubqueryArms: 1}}},
		{"dba.stackexchange 114337: arms on different indexed columns", `SELECT mtid FROM publication WHERE mtid IN (SELECT 976271) OR last_modifier = 21321`,
			[]ORSubquery{{Column: "mtid, last_modifier", Arms: 2, SubqueryArms: 1}}},
		{"different columns, an arm that tests no column", `SELECT 1 FROM t WHERE a = $1 OR b IN (SELECT c FROM u) OR t.d IS NULL`, nil},
		{"one column's group reported alone", `SELECT 1 FROM t WHERE a = $1 OR a IN (SELECT c FROM u) OR b = 2`,
			[]ORSubquery{{Column: "a", Arms: 2, SubqueryArms: 1}}},
		{"single subquery arm, no OR", `SELECT 1 FROM t WHERE a IN (SELECT c FROM u)`, nil},
		{"AND is not OR", `SELECT 1 FROM t WHERE a = $1 AND a IN (SELECT c FROM u)`, nil},
		{"NOT IN subquery is not an equality arm", `SELECT 1 FROM t WHERE a = 1 OR a NOT IN (SELECT c FROM u)`, nil},
		{"column = other column is a join", `SELECT 1 FROM t, u WHERE t.a = u.a OR t.a IN (SELECT c FROM w)`, nil},
		{"EXISTS arm tests no column", `SELECT 1 FROM t WHERE t.a = 1 OR EXISTS (SELECT 1 FROM u WHERE u.a = t.a)`, nil},
		{"OR and IN spelled in lower case inside a string are not SQL", `SELECT 'a = 1 or a in (select 1)' FROM t`, nil},
		{"EXPLAIN of such a statement is a diagnosis", `EXPLAIN (ANALYZE, FORMAT JSON) SELECT 1 FROM t WHERE a = $1 OR a IN (SELECT c FROM u)`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := FindORSubqueries(c.sql)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := FindORSubqueries(`SELECT * FROM t WHERE a = 1 OR a IN (SELECT`); err == nil {
		t.Error("cut-off text parsed without error")
	}
}
